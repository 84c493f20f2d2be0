#pragma once
// The shape and hyper-parameters of a decoder-only transformer, read from a Hugging Face
// config.json. Everything the forward pass needs to know about a model that is not a tensor.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace keel {

struct RopeScaling {
  enum class Kind { None, Llama3 };
  Kind kind = Kind::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
};

// MLX affine quantization of linear and embedding weights (config.json "quantization" block).
struct MlxQuantization {
  int bits = 4;
  int group_size = 64;
};

struct ModelSpec {
  std::string model_type;  // llama, mistral, qwen2, qwen3
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // explicit in config.json for Qwen3; hidden_size / num_heads otherwise
  int64_t vocab_size = 0;
  int64_t max_position = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qk_norm = false;  // Qwen3: RMSNorm over each head of q and k before RoPE
  std::optional<MlxQuantization> quantization;
  std::vector<int32_t> eos_token_ids;  // from config.json only; see load_eos_token_ids()
  std::optional<int32_t> bos_token_id;

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// Parses config.json. `label` names the file in error messages. Throws keel::Error naming the
// missing or invalid key, or the unsupported architecture.
ModelSpec parse_model_spec(const nlohmann::json& config, const std::string& label);
ModelSpec read_model_spec(const std::filesystem::path& config_json);

// The ids that end generation: the union of config.json, generation_config.json and the
// tokenizer's eos_token (tokenizer_config.json, resolved through tokenizer.json), so a model that
// names one id in one file and another elsewhere still stops.
std::vector<int32_t> load_eos_token_ids(const std::filesystem::path& model_dir, const ModelSpec& spec);

}  // namespace keel
