#pragma once
// Warnings about a sharded checkpoint whose shard file names disagree with its index or with each
// other (a folder holding pieces of two downloads). Plain functions; safe on any thread.
#include <string>
#include <vector>

#include "keel/model/weight_index.h"

namespace keel::plan {

std::vector<std::string> check_shard_names(const WeightIndex& index);

}  // namespace keel::plan
