#include "keel/model/model_spec.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "keel/util/error.h"

namespace keel {
namespace {

using nlohmann::json;

const char* const kSupportedTypes[] = {"llama", "mistral", "qwen2", "qwen3"};

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(path.string() + ": not found or unreadable");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error(path.string() + ": not valid JSON");
  return j;
}

class ConfigReader {
 public:
  ConfigReader(const json& j, const std::string& label) : j_(j), label_(label) {}

  int64_t positive_int(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) throw Error(label_ + ": missing key '" + key + "'");
    if (!it->is_number_integer() || it->get<int64_t>() <= 0)
      throw Error(label_ + ": key '" + key + "' must be a positive integer, got " + it->dump());
    return it->get<int64_t>();
  }
  int64_t positive_int_or(const char* key, int64_t fallback) const {
    auto it = j_.find(key);
    return (it == j_.end() || it->is_null()) ? fallback : positive_int(key);
  }
  double number_or(const char* key, double fallback) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_number()) throw Error(label_ + ": key '" + key + "' must be a number, got " + it->dump());
    return it->get<double>();
  }
  bool bool_or(const char* key, bool fallback) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) throw Error(label_ + ": key '" + key + "' must be true or false");
    return it->get<bool>();
  }

 private:
  const json& j_;
  const std::string& label_;
};

void add_ids(const json& value, std::vector<int32_t>& out) {
  if (value.is_number_integer()) out.push_back(value.get<int32_t>());
  if (value.is_array())
    for (const auto& v : value)
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
}

RopeScaling parse_rope_scaling(const json& j, const std::string& label) {
  RopeScaling rs;
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return rs;
  if (!it->is_object()) throw Error(label + ": rope_scaling must be an object or null");
  std::string type = it->value("rope_type", it->value("type", ""));
  if (type == "default" || type.empty()) return rs;
  if (type != "llama3")
    throw Error(label + ": rope_scaling type '" + type + "' is not supported yet (supported: llama3)");
  ConfigReader r(*it, label);
  rs.kind = RopeScaling::Kind::Llama3;
  rs.factor = r.number_or("factor", 8.0);
  rs.low_freq_factor = r.number_or("low_freq_factor", 1.0);
  rs.high_freq_factor = r.number_or("high_freq_factor", 4.0);
  rs.original_max_position = r.positive_int_or("original_max_position_embeddings", 8192);
  if (rs.factor <= 0 || rs.high_freq_factor <= rs.low_freq_factor)
    throw Error(label + ": rope_scaling needs factor > 0 and high_freq_factor > low_freq_factor");
  return rs;
}

}  // namespace

ModelSpec parse_model_spec(const json& j, const std::string& label) {
  if (!j.is_object()) throw Error(label + ": not a JSON object");
  ModelSpec s;
  auto mt = j.find("model_type");
  if (mt == j.end() || !mt->is_string()) throw Error(label + ": missing key 'model_type'");
  s.model_type = mt->get<std::string>();
  if (std::find(std::begin(kSupportedTypes), std::end(kSupportedTypes), s.model_type) == std::end(kSupportedTypes))
    throw Error(label + ": model_type '" + s.model_type +
                "' is not supported (supported: llama, mistral, qwen2, qwen3)");

  ConfigReader r(j, label);
  s.hidden_size = r.positive_int("hidden_size");
  s.intermediate_size = r.positive_int("intermediate_size");
  s.num_layers = r.positive_int("num_hidden_layers");
  s.num_heads = r.positive_int("num_attention_heads");
  s.num_kv_heads = r.positive_int_or("num_key_value_heads", s.num_heads);
  s.vocab_size = r.positive_int("vocab_size");
  s.max_position = r.positive_int_or("max_position_embeddings", 4096);
  s.rms_norm_eps = r.number_or("rms_norm_eps", 1e-6);
  s.rope_theta = r.number_or("rope_theta", 10000.0);
  s.tie_word_embeddings = r.bool_or("tie_word_embeddings", false);
  s.qk_norm = s.model_type == "qwen3";
  if (s.hidden_size % s.num_heads != 0 && !j.contains("head_dim"))
    throw Error(label + ": hidden_size is not divisible by num_attention_heads and head_dim is missing");
  s.head_dim = r.positive_int_or("head_dim", s.hidden_size / s.num_heads);
  if (s.head_dim % 2 != 0) throw Error(label + ": head_dim must be even for rotary embeddings");
  if (s.num_heads % s.num_kv_heads != 0)
    throw Error(label + ": num_attention_heads must be a multiple of num_key_value_heads");
  s.rope_scaling = parse_rope_scaling(j, label);

  if (auto q = j.find("quantization"); q != j.end() && !q->is_null()) {
    if (!q->is_object()) throw Error(label + ": quantization must be an object");
    ConfigReader qr(*q, label + " quantization");
    MlxQuantization mq{static_cast<int>(qr.positive_int("bits")), static_cast<int>(qr.positive_int("group_size"))};
    if (mq.bits != 4 && mq.bits != 8)
      throw Error(label + ": quantization bits " + std::to_string(mq.bits) + " is not supported (4 or 8)");
    if (mq.group_size != 32 && mq.group_size != 64 && mq.group_size != 128)
      throw Error(label + ": quantization group_size " + std::to_string(mq.group_size) +
                  " is not supported (32, 64 or 128)");
    s.quantization = mq;
  }

  if (auto e = j.find("eos_token_id"); e != j.end()) add_ids(*e, s.eos_token_ids);
  if (auto b = j.find("bos_token_id"); b != j.end() && b->is_number_integer()) s.bos_token_id = b->get<int32_t>();
  return s;
}

ModelSpec read_model_spec(const std::filesystem::path& config_json) {
  return parse_model_spec(read_json_file(config_json), config_json.string());
}

std::vector<int32_t> load_eos_token_ids(const std::filesystem::path& dir, const ModelSpec& spec) {
  std::vector<int32_t> ids = spec.eos_token_ids;
  if (auto gen = dir / "generation_config.json"; std::filesystem::exists(gen)) {
    json g = read_json_file(gen);
    if (g.is_object() && g.contains("eos_token_id")) add_ids(g["eos_token_id"], ids);
  }
  // tokenizer_config.json names the eos token by its text; tokenizer.json maps text to id.
  auto tc_path = dir / "tokenizer_config.json";
  auto tok_path = dir / "tokenizer.json";
  if (std::filesystem::exists(tc_path) && std::filesystem::exists(tok_path)) {
    json tc = read_json_file(tc_path);
    std::string eos;
    if (tc.is_object() && tc.contains("eos_token")) {
      const json& e = tc["eos_token"];
      if (e.is_string()) eos = e.get<std::string>();
      if (e.is_object() && e.contains("content") && e["content"].is_string()) eos = e["content"].get<std::string>();
    }
    if (!eos.empty()) {
      json tok = read_json_file(tok_path);
      bool found = false;
      if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
        for (const auto& t : tok["added_tokens"])
          if (t.is_object() && t.value("content", "") == eos && t.contains("id") && t["id"].is_number_integer()) {
            ids.push_back(t["id"].get<int32_t>());
            found = true;
          }
      if (!found && tok.contains("model") && tok["model"].is_object()) {
        const json& vocab = tok["model"].value("vocab", json());
        if (vocab.is_object() && vocab.contains(eos) && vocab[eos].is_number_integer())
          ids.push_back(vocab[eos].get<int32_t>());
      }
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace keel
