#pragma once
// A model's weights, used in place from the memory-mapped safetensors or GGUF files. Large matrices
// are never converted: kernels read F32/F16/BF16 elements, MLX packed integers or ggml blocks
// directly (some ggml formats' rows may be reordered at load into memory the matrix owns, the same bytes:
// Matrix::interleaved). Only small per-channel vectors (norms, biases) and MLX scales/biases are
// widened to float at load.
//
// Which tensors a layer has follows its LayerSpec (bias flags, q/k norms, sandwich norms), never
// which tensors the files happen to hold: a tensor the spec needs and the files lack, or one the
// files hold that the spec rules out, is an error naming it. Where each tensor is named is the
// architecture family's business (arch/): it passes its TensorNames, and its FamilyLoading for the
// layouts only it has. model/tensor_walk.h walks the tensors; model/tensor_binding.h binds each.
//
// Loaded once, then read-only: safe to read from any thread. Move-only (matrices may own their bytes).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "keel/model/active_bytes.h"
#include "keel/model/gguf_file.h"
#include "keel/model/model_spec.h"
#include "keel/model/safetensors.h"

namespace keel {

// F32..MXFP4 come from safetensors folders; the ggml block formats (Q8_0..MXFP4_GGUF) from GGUF
// files, each row a run of the format's blocks exactly as the file stores them (ggml_block_size()).
enum class WeightFormat { F32, F16, BF16, MLX4, MLX8, MXFP4, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, MXFP4_GGUF };

// ggml block formats: elements per block and bytes per block; {1, element size} for the float
// formats, {0, 0} for the MLX and HF MXFP4 layouts, which are not block-interleaved.
struct GgmlBlock {
  int elements;
  int bytes;
};
GgmlBlock ggml_block_size(WeightFormat f);
bool is_ggml_block_format(WeightFormat f);  // Q8_0 .. MXFP4_GGUF

// Floats of zero padding after MLX scales and biases: at least the widest SIMD vector (2048-bit SVE).
inline constexpr size_t kMlxScalePadding = 64;
const char* weight_format_name(WeightFormat f);

// A weight matrix [rows][cols] as a linear layer computes y = W x (rows = outputs).
struct Matrix {
  Matrix() = default;
  // Not copyable: `data` may point into `realigned`, which a copy would not carry along.
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  Matrix(Matrix&&) = default;  // a moved vector keeps its buffer, so `data` stays valid
  Matrix& operator=(Matrix&&) = default;

  std::string name;
  WeightFormat format = WeightFormat::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;  // row-major elements, MLX U32 words (cols*bits/32 per row), or ggml blocks
  // MLX affine quantization: value = scale * q + bias per group of group_size along a row.
  int group_size = 0;
  std::vector<float> scales;  // [rows][cols / group_size], then kMlxScalePadding zeros
  std::vector<float> biases;
  // MXFP4 (OCP microscaling, gpt-oss experts): `data` holds 16 bytes per 32 elements, two e2m1
  // codes a byte, low nibble first; each block of 32 is scaled by 2^(e - 127) for its e8m0
  // exponent e here ([rows][cols / 32], in the mapping).
  const uint8_t* block_exponents = nullptr;
  std::vector<uint8_t> realigned;  // owns `data` when the file's bytes were misaligned, or interleaved
  // ggml blocks only: rows in groups of 8, blocks side by side (ops/interleaved_rows.h), as
  // ops::interleave_for_kernels makes them at load where the int16 kernels read them faster.
  bool interleaved = false;

  int bits() const { return format == WeightFormat::MLX4 ? 4 : format == WeightFormat::MLX8 ? 8 : 0; }
  size_t row_bytes() const;
  size_t stored_bytes() const;  // bytes a full pass over the matrix reads (weights + scales + biases)
};

// Where a family keeps each tensor in a Hugging Face checkpoint (names without ".weight").
// Layer tensors are found under layer_prefix + index + "." + name.
struct TensorNames {
  std::string embed = "model.embed_tokens";
  std::string final_norm = "model.norm";
  std::string lm_head = "lm_head";
  std::string layer_prefix = "model.layers.";
  std::string attn_norm = "input_layernorm";
  std::string post_attn_norm;  // sandwich norms only
  std::string ffn_norm = "post_attention_layernorm";
  std::string post_ffn_norm;   // sandwich norms only
  std::string q = "self_attn.q_proj", k = "self_attn.k_proj", v = "self_attn.v_proj", o = "self_attn.o_proj";
  std::string q_norm = "self_attn.q_norm", k_norm = "self_attn.k_norm";
  std::string gate = "mlp.gate_proj", up = "mlp.up_proj", down = "mlp.down_proj";
  // Mixture-of-experts layers: the router, and each expert's gated FFN either per expert
  // (experts + e + "." + expert_gate) or stacked with a leading expert dimension, as MLX folders
  // ship them (stacked_experts + expert_gate).
  std::string router = "mlp.gate";
  std::string experts = "mlp.experts.";
  std::string stacked_experts = "mlp.switch_mlp.";
  std::string expert_gate = "gate_proj", expert_up = "up_proj", expert_down = "down_proj";
  // Set (gpt-oss, read by its FamilyLoading): stacked MXFP4 experts with gate and up fused under
  // this name, the router and expert projections with biases (NAME + "_bias").
  std::string expert_gate_up;
  std::string attention_sinks = "self_attn.sinks";
  // Gemma 4 (MoeSpec::beside_dense, read by its FamilyLoading): stacked experts named without
  // ".weight", gate and up as the two halves of one (experts, 2 * expert_ffn, dim) tensor; the
  // router's projection, its input scale and per-expert scale; the norms of the two FFN branches;
  // the layer scalar.
  std::string experts_gate_up_halves = "experts.gate_up_proj", experts_down = "experts.down_proj";
  std::string router_proj = "router.proj", router_scale = "router.scale", router_expert_scale = "router.per_expert_scale";
  std::string post_dense_norm = "post_feedforward_layernorm_1";
  std::string pre_moe_norm = "pre_feedforward_layernorm_2", post_moe_norm = "post_feedforward_layernorm_2";
  std::string layer_scalar = "layer_scalar";
  // Qwen3-Next: the linear-attention (Gated DeltaNet) layers' tensors under linear_attn, and the
  // shared expert beside the routed ones with its one-output sigmoid gate.
  std::string linear_attn = "linear_attn.";
  std::string shared_expert = "mlp.shared_expert.", shared_expert_gate = "mlp.shared_expert_gate";

  // These names with the language model under `root` instead of "model.": multimodal folders nest
  // it (kMultimodalRoots). lm_head moves beside the root's first part ("language_model.lm_head").
  TensorNames rooted_at(std::string_view root) const;
};

// One expert of a mixture-of-experts FFN: a gated FFN of its own.
struct ExpertWeights {
  Matrix gate, up;  // (expert_ffn, dim); empty when fused into gate_up
  Matrix gate_up;   // (2 * expert_ffn, dim) gpt-oss: gate on even rows, up on odd rows
  Matrix down;      // (dim, expert_ffn)
  // (2 * expert_ffn) MoeSpec::biases only; gate's on even entries, up's on odd ones, as gate_up's
  // rows are, also when gate and up are stored apart (gpt-oss in GGUF).
  std::vector<float> gate_up_bias;
  std::vector<float> down_bias;     // (dim)
};

// A Gated DeltaNet layer (AttentionKind::Linear), as the checkpoint stores it.
struct LinearAttentionWeights {
  // (2 * keys + 2 * values, dim): per key head [q key_dim | k key_dim | v | z], v and z holding that
  // key head's value_heads / key_heads value heads.
  Matrix in_qkvz;
  Matrix in_ba;               // (2 * value_heads, dim): per key head [b | a] of its value heads
  std::vector<float> conv;    // (keys * 2 + values, conv_kernel) depthwise taps over [q | k | v], oldest first
  std::vector<float> decay;   // (value_heads) -exp(A_log)
  std::vector<float> dt_bias;  // (value_heads)
  std::vector<float> norm;    // (value_dim) the output RMSNorm's weight (plain, not 1 + w)
  Matrix out;                 // (dim, values)
};

// One decoder layer; vectors the spec rules out are empty.
struct LayerWeights {
  std::vector<float> attn_norm;       // (dim) before attention
  std::vector<float> post_attn_norm;  // (dim) on the attention output (sandwich norms)
  std::vector<float> ffn_norm;        // (dim) before the FFN
  std::vector<float> post_ffn_norm;   // (dim) on the FFN output (sandwich norms)
  Matrix wq;                          // (q_dim, dim)
  Matrix wk, wv;                      // (kv_dim, dim)
  Matrix wo;                          // (dim, q_dim)
  std::vector<float> bq;              // (q_dim)
  std::vector<float> bk, bv;          // (kv_dim)
  std::vector<float> bo;              // (dim)
  std::vector<float> q_norm, k_norm;  // (head_dim), shared by every head
  std::vector<float> sinks;           // (heads) learned sink logits (LayerSpec::attention_sinks)
  Matrix gate, up;                    // (ffn, dim) dense FFN; empty in MoE layers
  Matrix down;                        // (dim, ffn)
  Matrix router;                      // (experts, dim) MoE layers only
  std::vector<float> router_bias;     // (experts) MoeSpec::biases only
  // MoeSpec::beside_dense (Gemma 4)
  std::vector<float> router_scale;       // (dim) on the router's normed input
  std::vector<float> expert_scale;       // (experts) on each chosen expert's weight
  std::vector<float> post_dense_norm;    // (dim) on the dense branch's output
  std::vector<float> pre_moe_norm;       // (dim) on the experts' input
  std::vector<float> post_moe_norm;      // (dim) on the experts' weighted sum
  float layer_scalar = 1.0f;             // LayerSpec::layer_scalar: multiplies the layer's output
  std::vector<ExpertWeights> experts;  // (experts) MoE layers only
  ExpertWeights shared_expert;         // MoeSpec::shared_expert_ffn_dim > 0
  Matrix shared_expert_gate;           // (1, dim)
  LinearAttentionWeights linear;       // AttentionKind::Linear layers only (no wq..wo then)
};

// Where multimodal folders put the language model: transformers >= 4.52 and keel synth write
// model.language_model.*; earlier exports (Gemma 3's own checkpoints) and MLX language_model.model.*.
inline constexpr std::string_view kMultimodalRoots[] = {"model.language_model.", "language_model.model."};

struct ModelWeights {
  std::filesystem::path dir;  // the model folder, or the (first) .gguf file
  ModelSpec spec;
  std::vector<int32_t> eos_token_ids;
  std::vector<std::unique_ptr<SafetensorsFile>> files;   // a folder's
  std::vector<std::shared_ptr<const gguf::File>> gguf_files;  // a GGUF model's, shards in order
  Matrix embed;                   // (vocab, dim)
  Matrix lm_head;                 // (vocab, dim); empty (rows == 0) when tied to embed: use output()
  std::vector<float> final_norm;  // (dim)
  std::vector<LayerWeights> layers;  // (num_layers)

  const Matrix& output() const { return lm_head.rows ? lm_head : embed; }
  WeightFormat format() const { return embed.format; }
  // Every matrix format the model holds, the most bytes first ("q4_k + q6_k + q5_0 + q8_0" for a
  // Q4_K_M GGUF, "bf16" for most folders): what logs and reports name the weights by.
  std::string formats_text() const;
  bool from_gguf() const { return !gguf_files.empty(); }
  // The weight matrices' bytes: all of them (resident) and what one decode step streams through
  // (active: attention, router, the experts one token is routed to, one embedding row and the
  // output head; model/active_bytes.h is the rule).
  DecodeWeightBytes decode_bytes() const;
  // Multiply-adds in the matrix products (attention scores and the recurrence excluded): each
  // token's through the layers (every-token matrices and experts_per_token routed experts of
  // average size), and the output head's, which prefill runs for the last token only.
  struct MatmulMacs {
    double per_token = 0;
    double head = 0;
  };
  MatmulMacs matmul_macs() const;
};

// f(m) for every weight matrix of the model (the embedding, the head, every layer's and every
// expert's), for passes over them all at load.
void for_each_matrix(ModelWeights& w, const std::function<void(Matrix&)>& f);

struct FamilyLoading;  // model/tensor_walk.h

// Loads the weights of a model described by `spec` (model.safetensors or the shards of
// model.safetensors.index.json) from a Hugging Face model folder, finding each tensor under
// `names`, or under `names` re-rooted at one of kMultimodalRoots. Use arch::load_model() to read
// the spec too. Throws keel::Error naming the file and tensor for anything missing, unexpected,
// truncated, misshapen or of an unsupported dtype.
ModelWeights load_weights(const std::filesystem::path& dir, ModelSpec spec, const TensorNames& names,
                          const FamilyLoading& family);

// The same from the mapped files of one GGUF model (ModelFiles::gguf: the shards, in order), whose
// tensors `names` names in ggml's scheme (blk.N.attn_q, ...). `spec` comes from the files'
// metadata (arch/gguf_model.h) and carries the eos ids.
ModelWeights load_gguf_weights(std::vector<std::shared_ptr<const gguf::File>> files, ModelSpec spec,
                               const TensorNames& names, const FamilyLoading& family);

}  // namespace keel
