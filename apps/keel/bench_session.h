#pragma once
#include <cstdint>

#include "keel/arch/model_source.h"
#include "keel/kv/kv_disk_tier.h"
#include "keel/kv/kv_policy.h"

namespace keel::cli {

// Runs and prints the multi-turn session benchmark (see bench_session.cpp). `disk`: the KV pool's
// disk tier (--kv-disk), so a second run with the same folder measures turn 1 after a restart.
void bench_session(const arch::ModelSource& model, int threads, int turns, int64_t system_tokens,
                   int64_t answer_tokens, const kv::KvPolicy& policy, const kv::KvDiskOptions& disk = {});

}  // namespace keel::cli
