#include "keel/arch/model_loader.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <span>
#include <system_error>
#include <thread>
#include <vector>

#include "keel/arch/family.h"
#include "keel/arch/gguf_model.h"
#include "keel/ops/matmul.h"
#include "keel/util/error.h"

namespace keel::arch {
namespace {

[[noreturn]] void unsupported(const ConfigView& c, std::string_view key, const std::string& what) {
  throw Error(c.label() + ": key '" + std::string(key) + "': " + what + " is not supported yet");
}

void check_runnable(const ConfigView& c, const ModelSpec& s, const Family& family) {
  if (s.intermediate_size <= 0 && !s.layers.empty() && !s.layers.front().moe)
    throw Error(c.label() + ": missing key 'intermediate_size' (needed for the FFN)");
  for (const LayerSpec& l : s.layers) {
    switch (l.attention) {
      case AttentionKind::Full:
      case AttentionKind::Sliding: break;
      case AttentionKind::Mla: unsupported(c, "kv_lora_rank", "multi-head latent attention (MLA)");
      case AttentionKind::Linear:
        if (!family.linear_attention)
          unsupported(c, c.has("layer_types") ? "layer_types" : "full_attention_interval",
                      "linear attention in " + std::string(family.model_type));
        break;
      case AttentionKind::SharedKv: unsupported(c, "num_kv_shared_layers", "sharing KV between layers");
    }
    if (l.moe && !family.mixture_of_experts)
      unsupported(c, c.has("num_experts") ? "num_experts" : "num_local_experts",
                  "a mixture-of-experts FFN in " + std::string(family.model_type));
    if (l.moe && l.moe->shared_expert_ffn_dim && !family.shared_expert)
      unsupported(c, c.has("n_shared_experts") ? "n_shared_experts" : "shared_expert_intermediate_size", "a shared expert");
    if (l.rope.scaling.kind == RopeScaling::Kind::Unsupported)
      throw Error(c.label() + ": rope_scaling type '" + l.rope.scaling.unsupported_type +
                  "' is not supported yet (supported: linear, llama3, yarn, proportional)");
    if (l.head_dim % 2 != 0) c.fail("head_dim", "must be even for rotary embeddings");
  }
}

// ops::interleave_for_kernels on every matrix, on up to 8 threads: the copy is mostly page faults
// and memory traffic (a 6 GB file took 28 s on one thread).
void interleave_for_kernels(ModelWeights& w) {
  std::vector<Matrix*> all;
  for_each_matrix(w, [&](Matrix& m) { all.push_back(&m); });
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (size_t i; (i = next++) < all.size();) {
        Matrix& m = *all[i];
        const std::span<const uint8_t> stored(m.data, static_cast<size_t>(m.rows) * m.row_bytes());
        if (ops::interleave_for_kernels(m))
          for (const auto& f : w.gguf_files) f->release(stored);  // the pages the interleaved copy replaces
      }
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = all.size();
    }
  };
  std::vector<std::thread> helpers(std::clamp(std::thread::hardware_concurrency(), 1u, 8u) - 1);
  for (auto& t : helpers) {
    try {
      t = std::thread(work);
    } catch (const std::system_error&) {
      break;  // no more threads: the ones running (and this one) do the rest
    }
  }
  work();
  for (auto& t : helpers)
    if (t.joinable()) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

ModelSpec describe_spec(const ConfigView& config) {
  ModelSpec spec = read_model_spec(config);
  if (const Family* f = find_family(spec.model_type)) f->refine(config, spec);
  return spec;
}

ModelSpec runnable_spec(const ConfigView& config) {
  ModelSpec spec = read_model_spec(config);
  const Family* f = find_family(spec.model_type);
  if (!f)
    throw Error(config.label() + ": model_type '" + spec.model_type + "' is not supported (supported: " +
                family_list() + ")");
  f->refine(config, spec);
  check_runnable(config, spec, *f);
  return spec;
}

ModelSpec runnable_spec(const ModelSource& model) {
  ModelSpec spec = runnable_spec(model.config);
  if (model.is_gguf()) adjust_for_gguf(*model.files.gguf.front(), spec);
  return spec;
}

ModelSpec describe_spec(const ModelSource& model) {
  ModelSpec spec = describe_spec(model.config);
  if (model.is_gguf()) adjust_for_gguf(*model.files.gguf.front(), spec);
  return spec;
}

ModelWeights load_model(const ModelSource& model) {
  ModelSpec spec = runnable_spec(model);
  const Family& family = *find_family(spec.model_type);
  if (!model.is_gguf()) return load_weights(model.files.path, std::move(spec), family.tensor_names(), family.loading);
  ModelWeights w = load_gguf_weights(model.files.gguf, std::move(spec), family.gguf_tensor_names(), family.loading);
  interleave_for_kernels(w);
  return w;
}

ModelWeights load_model(const std::filesystem::path& model) { return load_model(resolve_model(model)); }

}  // namespace keel::arch
