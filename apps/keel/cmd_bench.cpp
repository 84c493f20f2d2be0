// keel bench: prefill and decode speed of a model, as tokens/s and as fractions of this machine's
// measured memory bandwidth (decode) and peak FMA throughput (prefill). --session and --parallel
// hand over to bench_session.cpp and bench_parallel.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "bench_parallel.h"
#include "bench_session.h"
#include "kv_disk_flags.h"
#include "keel/arch/model_source.h"
#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/engine/sampler.h"
#include "keel/engine/scheduler.h"
#include "keel/engine/standalone_sequence.h"
#include "keel/kv/kv_footprint.h"
#include "keel/plan/kv_presets.h"
#include "keel/plan/measured_bandwidth.h"
#include "keel/ops/machine_limits.h"
#include "keel/ops/simd_kernels.h"
#include "keel/ops/simd_target.h"
#include "keel/util/error.h"
#include "model_flags.h"

namespace keel::cli {
namespace {

// As `keel serve --parallel`.
constexpr long kMaxParallelTurns = 64;

double elapsed(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int bench_command(const CommandArgs& argv) {
  std::set<std::string> flags = kModelFlags;
  flags.insert({"prompt-tokens", "gen-tokens", "repeats", "kv-policy", "kv-context", "session", "system-tokens",
                "answer-tokens", "parallel", "long-prompt-tokens", "short-requests", "short-prompt-tokens",
                "short-gen-tokens", "short-interval-ms", "kv-disk", "kv-disk-gb", "prefill-chunk", "target"});
  Args args(argv, flags, {"no-limits"});
  // One SIMD target's kernels (KEEL_SIMD_TARGET does the same for every command).
  if (args.has("target")) ops::restrict_simd_target(args.require("target"));
  const kv::KvPolicy policy = kv::KvPolicy::parse(args.get_or("kv-policy", "full"));
  if (args.has("session")) {
    const long turns = args.get_int("session", 20, 1, 100000);
    const long threads = args.get_int("threads", 0, 0, kMaxThreads);
    const long system_tokens = args.get_int("system-tokens", 6000, 0, kMaxTokenCount);
    const long answer_tokens = args.get_int("answer-tokens", 32, 1, kMaxTokenCount);
    const arch::ModelSource model = arch::resolve_model(args.require("model"));
    const kv::KvDiskOptions disk = kv_disk_options(args.get("kv-disk"), args.get("kv-disk-gb"), model.files);
    bench_session(model, static_cast<int>(threads), static_cast<int>(turns), system_tokens, answer_tokens, policy, disk);
    return 0;
  }
  if (args.has("kv-disk") || args.has("kv-disk-gb"))
    throw Error("--kv-disk and --kv-disk-gb belong to keel bench --session (the other modes open no prefix cache)");
  if (args.has("parallel")) {
    ParallelBenchOptions o;
    o.model_dir = args.require("model");
    o.threads = static_cast<int>(args.get_int("threads", 0, 0, kMaxThreads));
    o.parallel = static_cast<int>(args.get_int("parallel", 1, 1, kMaxParallelTurns));
    o.policy = policy;
    o.prompt_tokens = args.get_int("prompt-tokens", o.prompt_tokens, 1, kMaxTokenCount);
    o.gen_tokens = args.get_int("gen-tokens", o.gen_tokens, 1, kMaxTokenCount);
    o.long_prompt_tokens = args.get_int("long-prompt-tokens", o.long_prompt_tokens, 1, kMaxTokenCount);
    o.short_requests = static_cast<int>(args.get_int("short-requests", o.short_requests, 0, 1000));
    o.short_prompt_tokens = args.get_int("short-prompt-tokens", o.short_prompt_tokens, 1, kMaxTokenCount);
    o.short_gen_tokens = args.get_int("short-gen-tokens", o.short_gen_tokens, 1, kMaxTokenCount);
    o.short_interval_ms = args.get_int("short-interval-ms", o.short_interval_ms, 0, 3'600'000);
    bench_parallel(o);
    return 0;
  }
  // Checked before the model loads: a bad flag costs nothing.
  const int64_t prompt_tokens = args.get_int("prompt-tokens", 256, 1, kMaxTokenCount);
  const int64_t gen_tokens = args.get_int("gen-tokens", 64, 1, kMaxTokenCount);
  const int repeats = static_cast<int>(args.get_int("repeats", 3, 1, 1000));
  // As `keel serve` prefills a prompt that runs alone: a step of step_tokens at a time.
  const int64_t chunk_flag = args.get_int("prefill-chunk", SchedulerOptions{}.step_tokens, 0, kMaxTokenCount);
  const int64_t chunk = chunk_flag == 0 ? prompt_tokens : chunk_flag;
  const int64_t kv_context = args.get_int("kv-context", 32768, 1, kMaxTokenCount);
  LoadedModel m = load_model_from_flags(args);

  const ModelWeights& w = m.weights;
  Transformer model(w, *m.pool);
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  for (int64_t i = 0; i < prompt_tokens; ++i) prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % w.spec.vocab_size);
  std::vector<float> logits(static_cast<size_t>(w.spec.vocab_size));

  // Best of `repeats`: the first run also pays for page faults on the mapped weights. The prompt
  // runs in passes of `chunk` tokens, the generated tokens one decode step each (greedy, end of
  // sequence ignored).
  const std::vector<chat::Role> roles(prompt.size(), chat::Role::user);
  double best_prefill = 1e30, best_decode = 1e30;
  for (int r = 0; r < repeats; ++r) {
    StandaloneSequence cache(w.spec, prompt_tokens + gen_tokens, policy, true);
    auto t0 = std::chrono::steady_clock::now();
    prefill(model, cache.sequence(), prompt, roles, chunk, logits);
    best_prefill = std::min(best_prefill, elapsed(t0));
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < gen_tokens; ++i) decode_step(model, cache.sequence(), argmax(logits), logits);
    best_decode = std::min(best_decode, elapsed(t0));
  }

  const double prefill_tps = static_cast<double>(prompt_tokens) / best_prefill;
  const double decode_tps = static_cast<double>(gen_tokens) / best_decode;
  const DecodeWeightBytes weight_bytes = w.decode_bytes();
  const double bytes_per_token = static_cast<double>(weight_bytes.active);
  // Matrix flops (2 per multiply-add): prefill runs the output head for its last token only.
  const ModelWeights::MatmulMacs macs = w.matmul_macs();
  const double prefill_flops = 2 * (static_cast<double>(prompt_tokens) * macs.per_token + macs.head);
  std::printf("model            %s (%s weights: %.1f MB resident, %.1f MB active = read per decoded token)\n",
              w.dir.string().c_str(), w.formats_text().c_str(), static_cast<double>(weight_bytes.resident) / 1e6,
              bytes_per_token / 1e6);
  std::printf("threads          %d\n", m.pool->size());
  std::printf("SIMD target      %s\n", ops::simd_target_name());  // the kernels' instruction set: name it beside every number
  std::printf("KV policy        %s\n", policy.describe().c_str());
  std::printf("prefill          %lld tokens: %.1f tok/s (%.2f GFLOP/s in matmuls)\n", static_cast<long long>(prompt_tokens),
              prefill_tps, prefill_flops / best_prefill / 1e9);
  std::printf("decode           %lld tokens: %.2f tok/s (%.2f GB/s of weights)\n", static_cast<long long>(gen_tokens),
              decode_tps, decode_tps * bytes_per_token / 1e9);
  // What each preset stores per token of a long context (all tokens user text: protect keeps only
  // its sinks and recent window at bf16 then; system prompt and tools would add bf16 tokens).
  std::printf("KV bytes/token   at %lld tokens:", static_cast<long long>(kv_context));
  for (plan::KvPreset preset : plan::kPresetsByPrecision)
    std::printf(" %s %.0f", std::string(plan::kv_preset_name(preset)).c_str(),
                kv::kv_bytes_per_token(w.spec, kv::KvPolicy::preset(preset), kv_context));
  std::printf("\n");
  if (!args.has("no-limits")) {
    const auto limits = ops::measure_machine_limits(*m.pool);
    // Cached for `keel plan`, which estimates decode speed from it without measuring.
    plan::store_measured_bandwidth(limits.read_bandwidth_bytes_per_s);
    const double decode_limit = limits.read_bandwidth_bytes_per_s / bytes_per_token;
    const double prefill_limit = static_cast<double>(prompt_tokens) * limits.peak_flops / prefill_flops;
    std::printf("machine          %.1f GB/s read bandwidth, %.1f GFLOP/s peak f32 FMA (measured)\n",
                limits.read_bandwidth_bytes_per_s / 1e9, limits.peak_flops / 1e9);
    std::printf("decode vs limit  %.2f of %.2f tok/s bandwidth bound = %.0f%%\n", decode_tps, decode_limit,
                100 * decode_tps / decode_limit);
    std::printf("prefill vs limit %.1f of %.1f tok/s compute bound = %.0f%%\n", prefill_tps, prefill_limit,
                100 * prefill_tps / prefill_limit);
    if (limits.peak_bf16_flops > 0) {  // what bf16 (and, on this CPU, MLX) products really run on
      const double bf16_limit = static_cast<double>(prompt_tokens) * limits.peak_bf16_flops / prefill_flops;
      std::printf("prefill vs bf16  %.1f of %.1f tok/s at %.1f GFLOP/s peak bf16 dot products = %.0f%%\n", prefill_tps,
                  bf16_limit, limits.peak_bf16_flops / 1e9, 100 * prefill_tps / bf16_limit);
    }
  }
  return 0;
}

}  // namespace keel::cli
