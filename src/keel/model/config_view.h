#pragma once
// A config.json as every reader of a model folder sees it. Multimodal folders (Gemma 3 and 4,
// Llava...) nest the language model under `text_config`; lookups try that block first and then the
// top level, and every failure names the file and the key, e.g.
//   ".../config.json: missing key 'num_key_value_heads' (needed for the KV size)".
// The one config reader: model/model_spec.cpp, the families in arch/ and the planner all use it.
// Immutable after construction; safe to read from any thread.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace keel {

class ConfigView {
 public:
  ConfigView(nlohmann::json root, std::string label);
  // Reads and parses the file; throws keel::Error naming it when it is missing or not JSON.
  static ConfigView load(const std::filesystem::path& config_json);

  const nlohmann::json& root() const { return root_; }
  const std::string& label() const { return label_; }
  bool has_text_config() const { return has_text_config_; }
  const nlohmann::json& text_block() const;

  // The value of `key` in the text block, else at the top level; null counts as absent.
  const nlohmann::json* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // `why` finishes the error message: "needed for the KV size".
  int64_t require_int(std::string_view key, std::string_view why) const;
  std::optional<int64_t> optional_int(std::string_view key) const;
  std::optional<std::string> optional_string(std::string_view key) const;
  std::optional<bool> optional_bool(std::string_view key) const;
  std::optional<double> optional_number(std::string_view key) const;

  [[noreturn]] void fail(std::string_view key, const std::string& problem) const;

 private:
  nlohmann::json root_;
  bool has_text_config_ = false;  // a flag, not a pointer, so copies stay valid
  std::string label_;
};

}  // namespace keel
