#include "keel/kv/kv_policy.h"

#include <charconv>
#include <optional>
#include <vector>

#include "keel/kv/kv_format.h"
#include "keel/util/error.h"

namespace keel::kv {
namespace {

std::string formats_list() {
  std::string s;
  for (KvFormat f : kAllKvFormats) s += (s.empty() ? "" : ", ") + std::string(kv_format_name(f));
  return s;
}

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',' || text[i] == '\t')) ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != ',' && text[j] != '\t') ++j;
    if (j > i) words.push_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

int64_t parse_count(std::string_view key, std::string_view value, std::string_view text) {
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < 0)
    throw Error("KV policy '" + std::string(text) + "': " + std::string(key) + "=" + std::string(value) +
                " is not a non-negative token count");
  return n;
}

struct LayerTerm {
  int64_t below = 0;
  KvFormat k = KvFormat::Int2, v = KvFormat::Int2;
};

// "layers<N" (the key) and "k:F", "v:F", "k:F/v:G", "v:G/k:F" or "F" (the value).
LayerTerm parse_layer_term(std::string_view key, std::string_view value, std::string_view text) {
  const std::string where = "KV policy '" + std::string(text) + "': ";
  const std::string word = std::string(key) + "=" + std::string(value);
  LayerTerm term;
  const std::string_view count = key.substr(std::string_view("layers<").size());
  const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), term.below);
  if (ec != std::errc() || end != count.data() + count.size() || term.below < 1)
    throw Error(where + "'" + word + "': the layer count after 'layers<' must be a positive integer");
  bool k_named = false, v_named = false;
  auto format_of = [&](std::string_view name) {
    const std::optional<KvFormat> f = format_from_name(name);
    if (!f)
      throw Error(where + "unknown format '" + std::string(name) + "' in '" + word + "' (expected " + formats_list() + ")");
    return *f;
  };
  if (value.find(':') == std::string_view::npos) {
    term.k = term.v = format_of(value);
    return term;
  }
  size_t i = 0;
  while (i <= value.size()) {
    size_t j = value.find('/', i);
    if (j == std::string_view::npos) j = value.size();
    const std::string_view part = value.substr(i, j - i);
    const size_t colon = part.find(':');
    const std::string_view side = colon == std::string_view::npos ? part : part.substr(0, colon);
    if (colon == std::string_view::npos || (side != "k" && side != "v"))
      throw Error(where + "'" + std::string(part) + "' in '" + word +
                  "' is not k:<format> or v:<format> (e.g. layers<2=k:bf16 or layers<2=k:bf16/v:int8)");
    bool& named = side == "k" ? k_named : v_named;
    if (named) throw Error(where + "'" + std::string(side) + "' is given twice in '" + word + "'");
    named = true;
    (side == "k" ? term.k : term.v) = format_of(part.substr(colon + 1));
    i = j + 1;
  }
  return term;
}

}  // namespace

KvFormat more_precise(KvFormat a, KvFormat b) {
  // Bytes per vector order the formats by the bits they keep; any width gives the same order.
  return kv_vector_bytes(a, kKvQuantGroup) >= kv_vector_bytes(b, kKvQuantGroup) ? a : b;
}

KvPolicy::KvPolicy() { formats_.fill(KvFormat::BF16); }

KvPolicy KvPolicy::preset(KvPreset preset) {
  KvPolicy p;
  switch (preset) {
    case KvPreset::Full:
      return p;
    case KvPreset::Int8:
      return parse("default=int8");
    case KvPreset::Int4:
      return parse("default=int4");
    case KvPreset::Protect:
      return parse("system=bf16 tools=bf16 tool_call=int8 default=int4")
          .with_sink(kProtectSinkTokens)
          .with_recent(kProtectRecentTokens);
    case KvPreset::ProtectKeys:
      return parse("system=bf16 tools=bf16 tool_call=int8 default=int4 layers<" + std::to_string(kProtectKeysLayers) +
                   "=k:bf16")
          .with_sink(kProtectSinkTokens)
          .with_recent(kProtectRecentTokens);
    case KvPreset::Auto:
      break;
  }
  throw Error("the auto KV policy must be resolved to a preset (full, int8, protect-k, protect or int4) before use");
}

KvPolicy KvPolicy::parse(std::string_view text) {
  const std::vector<std::string_view> words = split_words(text);
  if (words.size() == 1 && words[0].find('=') == std::string_view::npos) {
    if (words[0] == "auto") return preset(KvPreset::Auto);  // throws: the caller resolves auto
    for (KvPreset p : kPresetsByPrecision)
      if (words[0] == kv_preset_name(p)) return preset(p);
    throw Error("unknown KV policy '" + std::string(words[0]) +
                "' (expected full, int8, int4, protect, protect-k, auto, or a spec such as "
                "'system=bf16 tools=bf16 sink=4 recent=256 tool_call=int8 default=int4')");
  }
  if (words.empty()) throw Error("empty KV policy (expected a preset name or a spec such as 'default=int8')");

  std::array<std::optional<KvFormat>, chat::kRoleCount> role_formats;
  std::optional<KvFormat> default_format;
  std::optional<int64_t> sink, recent;
  std::optional<LayerTerm> layers;
  for (std::string_view word : words) {
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos)
      throw Error("KV policy '" + std::string(text) + "': '" + std::string(word) + "' is not of the form key=value");
    const std::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
    auto duplicate = [&] {
      return Error("KV policy '" + std::string(text) + "': '" + std::string(key) + "' is given twice");
    };
    if (key.starts_with("layers<")) {
      if (layers)
        throw Error("KV policy '" + std::string(text) + "': 'layers<' is given twice (one layer term per policy)");
      layers = parse_layer_term(key, value, text);
      continue;
    }
    if (key == "sink" || key == "recent") {
      std::optional<int64_t>& slot = key == "sink" ? sink : recent;
      if (slot) throw duplicate();
      slot = parse_count(key, value, text);
      continue;
    }
    const std::optional<chat::Role> role = chat::role_from_name(key);
    if (!role && key != "default")
      throw Error("KV policy '" + std::string(text) + "': unknown key '" + std::string(key) +
                  "' (expected a role: scaffolding, system, tools, user, assistant, tool_call, tool_result, "
                  "reasoning; or default, sink, recent, layers<N)");
    const std::optional<KvFormat> format = format_from_name(value);
    if (!format)
      throw Error("KV policy '" + std::string(text) + "': unknown format '" + std::string(value) + "' for " +
                  std::string(key) + " (expected " + formats_list() + ")");
    std::optional<KvFormat>& slot = role ? role_formats[static_cast<size_t>(*role)] : default_format;
    if (slot) throw duplicate();
    slot = format;
  }

  KvPolicy p;
  p.default_ = default_format.value_or(KvFormat::BF16);
  for (size_t r = 0; r < chat::kRoleCount; ++r) p.formats_[r] = role_formats[r].value_or(p.default_);
  p.sink_ = sink.value_or(0);
  p.recent_ = recent.value_or(0);
  if (layers && (layers->k != KvFormat::Int2 || layers->v != KvFormat::Int2)) {  // else a no-op
    p.layers_below_ = layers->below;
    p.layer_k_ = layers->k;
    p.layer_v_ = layers->v;
  }
  return p;
}

KvRowForms KvPolicy::row_forms(int64_t layer, KvFormat block) const {
  if (layer < layers_below_) return {more_precise(block, layer_k_), more_precise(block, layer_v_)};
  return {block, block};
}

KvFormat KvPolicy::token_format(chat::Role role, int64_t pos) const {
  return pos < sink_ ? KvFormat::BF16 : role_format(role);
}

KvFormat KvPolicy::block_format(std::span<const chat::Role> roles, int64_t first_pos) const {
  KvFormat f = KvFormat::Int2;  // the least precise format; any token raises it
  for (size_t i = 0; i < roles.size(); ++i)
    f = more_precise(f, token_format(roles[i], first_pos + static_cast<int64_t>(i)));
  return f;
}

bool KvPolicy::quantizes() const {
  if (default_ != KvFormat::BF16) return true;
  for (KvFormat f : formats_)
    if (f != KvFormat::BF16) return true;
  return false;
}

KvPolicy KvPolicy::with_recent(int64_t recent) const {
  if (recent < 0) throw Error("the KV recent window cannot be negative");
  KvPolicy p = *this;
  p.recent_ = recent;
  return p;
}

KvPolicy KvPolicy::with_sink(int64_t sink) const {
  if (sink < 0) throw Error("the number of KV sink tokens cannot be negative");
  KvPolicy p = *this;
  p.sink_ = sink;
  return p;
}

std::string KvPolicy::describe() const {
  std::string s;
  for (size_t r = 0; r < chat::kRoleCount; ++r) {
    if (formats_[r] == default_) continue;
    s += std::string(chat::role_name(static_cast<chat::Role>(r))) + "=" + std::string(kv_format_name(formats_[r])) + " ";
  }
  if (layers_below_ > 0) {
    s += "layers<" + std::to_string(layers_below_) + "=";
    if (layer_k_ == layer_v_)
      s += std::string(kv_format_name(layer_k_));
    else if (layer_v_ == KvFormat::Int2)
      s += "k:" + std::string(kv_format_name(layer_k_));
    else if (layer_k_ == KvFormat::Int2)
      s += "v:" + std::string(kv_format_name(layer_v_));
    else
      s += "k:" + std::string(kv_format_name(layer_k_)) + "/v:" + std::string(kv_format_name(layer_v_));
    s += " ";
  }
  s += "sink=" + std::to_string(sink_) + " recent=" + std::to_string(recent_) +
       " default=" + std::string(kv_format_name(default_));
  return s;
}

}  // namespace keel::kv
