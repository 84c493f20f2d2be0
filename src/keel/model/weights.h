#pragma once
// A model's weights, used in place from the memory-mapped safetensors files. Large matrices are
// never converted: kernels read F32/F16/BF16 elements or MLX packed integers directly. Only small
// per-channel vectors (norms, biases) and MLX scales/biases are widened to float at load.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "keel/model/model_spec.h"
#include "keel/model/safetensors.h"

namespace keel {

enum class WeightFormat { F32, F16, BF16, MLX4, MLX8 };

// Floats of zero padding after MLX scales and biases: at least the widest SIMD vector (2048-bit SVE).
inline constexpr size_t kMlxScalePadding = 64;
const char* weight_format_name(WeightFormat f);

// A weight matrix [rows][cols] as a linear layer computes y = W x (rows = outputs).
struct Matrix {
  std::string name;
  WeightFormat format = WeightFormat::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;  // row-major elements, or MLX U32 words (cols*bits/32 per row)
  // MLX affine quantization: value = scale * q + bias per group of group_size along a row.
  int group_size = 0;
  std::vector<float> scales;  // [rows][cols / group_size], then kMlxScalePadding zeros
  std::vector<float> biases;
  std::vector<uint8_t> realigned;  // owns `data` when the file's bytes were misaligned

  int bits() const { return format == WeightFormat::MLX4 ? 4 : format == WeightFormat::MLX8 ? 8 : 0; }
  size_t row_bytes() const;
  size_t stored_bytes() const;  // bytes a full pass over the matrix reads (weights + scales + biases)
};

struct LayerWeights {
  std::vector<float> attn_norm, mlp_norm;
  Matrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;        // empty when the checkpoint has no attention bias
  std::vector<float> q_norm, k_norm;    // Qwen3 per-head RMSNorm weights, else empty
  Matrix gate, up, down;
};

struct ModelWeights {
  std::filesystem::path dir;
  ModelSpec spec;
  std::vector<int32_t> eos_token_ids;
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  Matrix embed;
  Matrix lm_head;  // empty (rows == 0) when tied to embed; use output()
  std::vector<float> final_norm;
  std::vector<LayerWeights> layers;

  const Matrix& output() const { return lm_head.rows ? lm_head : embed; }
  WeightFormat format() const { return embed.format; }
  size_t weight_bytes_per_token() const;  // bytes a decode step streams through (all layers + lm_head)
};

// Loads config.json and the weights (model.safetensors or the shards of
// model.safetensors.index.json) from a Hugging Face model folder. Throws keel::Error naming the
// file and tensor for anything missing, truncated, misshapen or of an unsupported dtype.
ModelWeights load_model(const std::filesystem::path& dir);

}  // namespace keel
