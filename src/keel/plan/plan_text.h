#pragma once
// The plan as a human reads it: a header of facts, the KV cost per token per layer kind, one row
// per KV preset, the recommendation and the warnings.
// A pure function of the Plan: any thread.
#include <string>

#include "keel/plan/planner.h"

namespace keel::plan {

std::string format_plan_text(const Plan& plan);

}  // namespace keel::plan
