#include "model_flags.h"

#include <climits>
#include <cstdint>
#include <cstdio>

#include "keel/arch/model_loader.h"
#include "keel/ops/simd_kernels.h"
#include "keel/util/error.h"

namespace keel::cli {

LoadedModel load_model_from_flags(const Args& args) {
  const long threads = args.get_int("threads", 0, 0, kMaxThreads);  // 0: one per core
  arch::ModelSource source = arch::resolve_model(args.require("model"));
  ModelWeights weights = arch::load_model(source);
  LoadedModel m{std::move(source), std::move(weights), nullptr};
  m.pool = std::make_unique<ThreadPool>(static_cast<int>(threads));
  const ModelSpec& s = m.weights.spec;
  std::fprintf(stderr, "keel: model %s (%s, %lld layers, hidden %lld, %s weights, %.1f MB), %d threads, simd %s\n",
               m.weights.dir.string().c_str(), s.model_type.c_str(), static_cast<long long>(s.num_layers),
               static_cast<long long>(s.hidden_size), m.weights.formats_text().c_str(),
               static_cast<double>(m.weights.decode_bytes().resident) / 1e6, m.pool->size(), ops::simd_target_name());
  return m;
}

SamplingParams sampling_from_flags(const Args& args) {
  SamplingParams p;
  p.temperature = args.get_double("temperature", 0.0, 0.0, kMaxTemperature);
  p.top_k = args.get_int("top-k", 0, 0, INT32_MAX);
  p.top_p = args.get_double("top-p", 1.0, 0.0, 1.0);
  p.min_p = args.get_double("min-p", 0.0, 0.0, 1.0);
  p.seed = static_cast<uint64_t>(args.get_int("seed", 0, 0, LONG_MAX));
  return p;
}

}  // namespace keel::cli
