#pragma once
// Flags shared by the commands that load and run a model (run, bench).
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "args.h"
#include "keel/arch/model_source.h"
#include "keel/engine/sampler.h"
#include "keel/model/weights.h"
#include "keel/util/thread_pool.h"

namespace keel::cli {

inline const std::set<std::string> kModelFlags = {"model", "threads"};
inline const std::set<std::string> kSamplingFlags = {"temperature", "top-k", "top-p", "min-p", "seed"};

struct LoadedModel {
  arch::ModelSource source;
  ModelWeights weights;
  std::unique_ptr<ThreadPool> pool;
};

// Resolves and loads --model DIR and starts --threads workers (default: one per core), logging what was
// loaded to stderr.
LoadedModel load_model_from_flags(const Args& args);
SamplingParams sampling_from_flags(const Args& args);

}  // namespace keel::cli
