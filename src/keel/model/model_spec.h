#pragma once
// The one description of a model that every command uses (serve, run, plan, synth, bench, eval):
// model-wide hyper-parameters and one LayerSpec per layer, read from a Hugging Face folder's
// config.json (the `text_config` block of multimodal folders first). read_model_spec() describes
// any decoder the config explains, including kinds keel cannot run yet (MLA, linear attention),
// so `keel plan` can size them; an architecture family in arch/ refines the spec (norm kind,
// activation, per-layer rope, scales) and is what makes a model runnable.
//
// Plain data: built once at load, then read-only and safe to share between threads.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace keel {

class ConfigView;

enum class AttentionKind {
  Full,      // K and V of every position
  Sliding,   // K and V of the last `window` positions
  Mla,       // multi-head latent attention: one compressed latent + a rope key per token
  Linear,    // recurrent state of fixed size (Gated DeltaNet), nothing per token
  SharedKv,  // attends over an earlier layer's cache (Gemma num_kv_shared_layers)
};
const char* attention_kind_name(AttentionKind kind);

struct RopeScaling {
  enum class Kind { None, Linear, Llama3, Yarn, Proportional, Factors, Unsupported };
  Kind kind = Kind::None;
  std::string unsupported_type;  // Unsupported: the config's rope_type, e.g. "longrope"
  double factor = 1.0;
  double low_freq_factor = 1.0;   // Llama3
  double high_freq_factor = 4.0;  // Llama3
  int64_t original_max_position = 8192;  // Llama3, Yarn
  double beta_fast = 32.0;  // Yarn: rotations per context where interpolation stops
  double beta_slow = 1.0;   // Yarn: ... and where it is complete
  bool truncate = true;     // Yarn: round the ramp bounds to whole dimensions
  double attention_factor = 1.0;  // Yarn: multiplies cos and sin (0.1 ln(factor) + 1 by default)
  // Proportional (Gemma 4 global layers): the first partial_rotary_factor * head_dim / 2 pairs
  // rotate with the full head's frequencies (theta^(-2i/head_dim)), divided by `factor`; the rest not.
  double partial_rotary_factor = 1.0;
  // Factors (GGUF's rope_freqs.weight, how llama.cpp stores Llama 3.1's scaling): frequency i is
  // divided by factors[i], one per rotated pair.
  std::vector<double> factors;

  bool operator==(const RopeScaling&) const = default;
};

struct RopeSpec {
  double theta = 10000.0;
  RopeScaling scaling;
  // Rotate adjacent pairs (2i, 2i+1) instead of (i, i + head_dim/2). GGUF llama-architecture
  // files store q/k rows permuted for it, so keys and queries come out permuted alike and every
  // q.k equals the Hugging Face layout's.
  bool interleaved = false;
  // Rotate only the first rotary_dim dimensions of each head, pairing i with i + rotary_dim/2 at
  // frequencies theta^(-2i/rotary_dim) (Hugging Face's partial_rotary_factor: Qwen3-Next); the
  // rest pass through. 0: the whole head.
  int64_t rotary_dim = 0;

  bool operator==(const RopeSpec&) const = default;
};

enum class NormKind {
  Rms,            // x / rms(x) * w
  RmsUnitOffset,  // x / rms(x) * (1 + w): Gemma stores the weight as an offset from one
};

enum class Activation { Silu, GeluTanh };

// The shapes the planner needs of layers keel does not run yet.
struct MlaDims {
  int64_t kv_lora_rank = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t index_head_dim = 0;  // DeepSeek-V3.2's sparse-attention indexer key; 0: none
};
struct LinearAttentionDims {
  int64_t key_heads = 0, value_heads = 0, key_head_dim = 0, value_head_dim = 0, conv_kernel = 0;
};

// A mixture-of-experts FFN: a router picks experts_per_token of `experts` gated experts per token.
// Two kinds: Qwen's (softmax over all experts, then the top k, optionally renormalized; SwiGLU
// experts without bias) and gpt-oss's (router with bias, the top k logits then a softmax over just
// them; experts with biases and a clamped SwiGLU over gate/up rows fused and interleaved).
struct MoeSpec {
  int64_t experts = 0;
  int64_t experts_per_token = 0;
  int64_t expert_ffn_dim = 0;
  int64_t shared_expert_ffn_dim = 0;  // 0: no shared expert; Qwen's runs on every token, times sigmoid(its gate)
  bool norm_topk_prob = false;        // renormalize the chosen experts' weights to sum to one
  bool softmax_after_topk = false;    // gpt-oss: softmax over the chosen k logits only
  bool biases = false;                // gpt-oss: router and expert projections have biases
  double swiglu_limit = 0;            // > 0: gpt-oss's clamped SwiGLU (see ops::clamped_swiglu)
  // Gemma 4: the experts run beside the dense FFN (each branch with its own norms, then summed);
  // the router reads the residual stream, RMS-normed without weight, times router.scale and
  // 1/sqrt(hidden); the chosen weights, renormalized, are multiplied by router.per_expert_scale.
  bool beside_dense = false;
};

struct LayerSpec {
  AttentionKind attention = AttentionKind::Full;
  int64_t window = 0;  // Sliding: positions attended, the query's own included
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  RopeSpec rope;
  double attention_scale = 0;  // multiplies q.k; the family sets it (1/sqrt(head_dim) by default)
  double attention_softcap = 0;  // 0: none
  bool attention_sinks = false;  // a learned per-head sink logit (gpt-oss)
  bool qkv_bias = false;
  bool o_bias = false;
  bool qk_norm = false;         // RMSNorm over each head of q and k before rope (Qwen3, Gemma 3)
  bool v_norm = false;          // RMSNorm without weight over each head of v (Gemma 4)
  bool values_are_keys = false;  // no v_proj: values are the raw k_proj output (Gemma 4 attention_k_eq_v)
  bool gated_attention = false;  // q_proj gives [query | gate] per head; the output is times sigmoid(gate) (Qwen3-Next)
  bool layer_scalar = false;     // the layer's whole output is multiplied by a learned scalar (Gemma 4)
  bool sandwich_norms = false;  // norms after attention and after the FFN too: four per layer (Gemma)
  int64_t ffn_dim = 0;                 // dense FFN width
  std::optional<MoeSpec> moe;          // set: the FFN is a mixture of experts
  Activation activation = Activation::Silu;
  std::optional<MlaDims> mla;                  // AttentionKind::Mla
  std::optional<LinearAttentionDims> linear;  // AttentionKind::Linear

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// MLX affine quantization of linear and embedding weights (config.json "quantization" block).
struct MlxQuantization {
  int bits = 4;  // 0: this module is not quantized (a per-module override of `false`)
  int group_size = 64;
  std::string mode = "affine";  // mlx-lm's "mode"; keel reads affine only
};

struct ModelSpec {
  std::string model_type;  // config.json model_type, e.g. qwen3, gemma3_text
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t vocab_size = 0;
  int64_t max_position = 0;
  // The config's base attention shape and FFN width; layers[i] holds each layer's own.
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  NormKind norm = NormKind::Rms;
  double norm_eps = 1e-6;
  double embedding_scale = 1.0;  // Gemma multiplies embeddings by sqrt(hidden_size)
  double final_softcap = 0;      // 0: none
  bool tie_word_embeddings = false;
  std::optional<MlxQuantization> quantization;
  // mlx-lm's per-module settings inside "quantization", e.g. the router of an MoE layer kept at 8
  // bits: module path ("model.layers.0.mlp.gate") -> its quantization.
  std::map<std::string, MlxQuantization> quantization_overrides;
  std::vector<int32_t> eos_token_ids;  // from config.json only; see load_eos_token_ids()
  std::optional<int32_t> bos_token_id;
  std::vector<LayerSpec> layers;  // (num_layers)
  std::string layer_pattern_source;  // which config key decided the attention kinds

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// Describes the decoder in `config` (see the file comment): the generic reading of the
// Hugging Face keys, before any family refines it. Throws keel::Error naming the file and the key.
ModelSpec read_model_spec(const ConfigView& config);

// The ids that end generation: the union of config.json, generation_config.json and the
// tokenizer's eos_token (tokenizer_config.json, resolved through tokenizer.json), so a model that
// names one id in one file and another elsewhere still stops.
std::vector<int32_t> load_eos_token_ids(const std::filesystem::path& model_dir, const ModelSpec& spec);

}  // namespace keel
