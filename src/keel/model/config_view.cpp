#include "keel/model/config_view.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "keel/util/error.h"

namespace keel {

ConfigView::ConfigView(nlohmann::json root, std::string label) : root_(std::move(root)), label_(std::move(label)) {
  if (!root_.is_object()) throw Error(label_ + ": expected a JSON object");
  auto it = root_.find("text_config");
  has_text_config_ = it != root_.end() && it->is_object();
}

const nlohmann::json& ConfigView::text_block() const { return has_text_config_ ? root_.at("text_config") : root_; }

ConfigView ConfigView::load(const std::filesystem::path& config_json) {
  std::ifstream in(config_json, std::ios::binary);
  if (!in) throw Error(config_json.string() + ": cannot read the model config");
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json root = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) throw Error(config_json.string() + ": not valid JSON");
  return ConfigView(std::move(root), config_json.string());
}

const nlohmann::json* ConfigView::find(std::string_view key) const {
  for (const nlohmann::json* block : {&text_block(), &root_}) {
    auto it = block->find(key);
    if (it != block->end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

void ConfigView::fail(std::string_view key, const std::string& problem) const {
  std::string where = has_text_config() && text_block().contains(key) ? "text_config." + std::string(key) : std::string(key);
  throw Error(label_ + ": key '" + where + "' " + problem);
}

std::optional<int64_t> ConfigView::optional_int(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  // Some exporters write integral values as floats (1e6, 4096.0); a fractional one is an error.
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  fail(key, "must be an integer, got " + v->dump());
}

int64_t ConfigView::require_int(std::string_view key, std::string_view why) const {
  auto v = optional_int(key);
  if (!v) {
    std::string where = has_text_config() ? "in text_config or at the top level; " : "";
    throw Error(label_ + ": missing key '" + std::string(key) + "' (" + where + std::string(why) + ")");
  }
  if (*v <= 0) fail(key, "must be positive, got " + std::to_string(*v));
  return *v;
}

std::optional<std::string> ConfigView::optional_string(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(key, "must be a string, got " + v->dump());
  return v->get<std::string>();
}

std::optional<bool> ConfigView::optional_bool(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(key, "must be true or false, got " + v->dump());
  return v->get<bool>();
}

std::optional<double> ConfigView::optional_number(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(key, "must be a number, got " + v->dump());
  return v->get<double>();
}

}  // namespace keel
