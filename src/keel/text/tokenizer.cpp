#include "keel/text/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "keel/text/added_tokens.h"
#include "keel/text/bpe_model.h"
#include "keel/text/json_fields.h"
#include "keel/text/normalizer.h"
#include "keel/text/pre_tokenizer.h"
#include "keel/util/utf8.h"
#include "keel/util/error.h"

namespace keel::text {

namespace jf = json_fields;

namespace {
// Ids index a dense table; real vocabularies stay far below this (Gemma 3: 262k).
constexpr int64_t kMaxTokenId = (1 << 22) - 1;
}  // namespace

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  BpeModel model;
  Decoder decoder;
  AddedTokenMatcher raw_added;         // matched in the input as written
  AddedTokenMatcher normalized_added;  // matched after normalization
  std::vector<std::string> id_to_token;
  std::vector<bool> special;
  std::vector<bool> added;
  std::unordered_map<std::string, int32_t> added_by_content;

  void encode_text(const std::string& text, bool at_text_start, std::vector<int32_t>& ids) const {
    std::vector<std::string> words{text};
    if (pre_tokenizer) pre_tokenizer->split(words, at_text_start);
    for (const auto& w : words) model.encode_word(w, ids);
  }
};

namespace {

std::vector<AddedToken> parse_added_tokens(const jf::Json& root, const std::string& label) {
  std::vector<AddedToken> tokens;
  const auto* list = jf::find(root, "added_tokens");
  if (!list) return tokens;
  jf::require_array(*list, label + ": added_tokens");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string where = label + ": added_tokens[" + std::to_string(i) + "]";
    const auto& entry = jf::require_object((*list)[i], where);
    AddedToken t;
    int64_t id = jf::as_int(jf::require(entry, "id", where), where + ".id");
    if (id < 0 || id > kMaxTokenId) jf::fail(where + ".id", "id out of range");
    t.id = static_cast<int32_t>(id);
    t.content = jf::require_string(entry, "content", where);
    t.special = jf::optional_bool(entry, "special", false, where);
    t.lstrip = jf::optional_bool(entry, "lstrip", false, where);
    t.rstrip = jf::optional_bool(entry, "rstrip", false, where);
    t.single_word = jf::optional_bool(entry, "single_word", false, where);
    t.normalized = jf::optional_bool(entry, "normalized", !t.special, where);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

std::shared_ptr<Tokenizer::Impl> build(const jf::Json& root, const std::string& label) {
  jf::require_object(root, label);
  auto impl = std::make_shared<Tokenizer::Impl>();
  if (const auto* n = jf::find(root, "normalizer")) impl->normalizer = make_normalizer(*n, label + ": normalizer");
  if (const auto* p = jf::find(root, "pre_tokenizer"))
    impl->pre_tokenizer = make_pre_tokenizer(*p, label + ": pre_tokenizer");
  impl->model = BpeModel::from_json(jf::require(root, "model", label), label + ": model");
  impl->decoder = Decoder::from_json(jf::find(root, "decoder"), label + ": decoder");

  int64_t max_id = -1;
  for (const auto& [token, id] : impl->model.vocab()) {
    if (id > kMaxTokenId) jf::fail(label + ": model.vocab[\"" + token + "\"]", "id out of range");
    max_id = std::max<int64_t>(max_id, id);
  }
  std::vector<AddedToken> added = parse_added_tokens(root, label);
  for (const auto& t : added) max_id = std::max<int64_t>(max_id, t.id);
  impl->id_to_token.resize(static_cast<size_t>(max_id + 1));
  impl->special.resize(static_cast<size_t>(max_id + 1), false);
  impl->added.resize(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : impl->model.vocab()) impl->id_to_token[static_cast<size_t>(id)] = token;

  for (const auto& t : added) {
    impl->special[static_cast<size_t>(t.id)] = t.special;
    impl->added[static_cast<size_t>(t.id)] = true;
    impl->added_by_content[t.content] = t.id;
    if (t.normalized && impl->normalizer) {
      // Hugging Face stores and decodes such a token in its normalized form ("▁[x]" for "[x]"
      // under a Prepend("▁") normalizer); decode matches that.
      std::string normalized = impl->normalizer->normalize(t.content);
      impl->id_to_token[static_cast<size_t>(t.id)] = normalized;
      impl->normalized_added.add(t, normalized);
    } else {
      impl->id_to_token[static_cast<size_t>(t.id)] = t.content;
      impl->raw_added.add(t, t.content);
    }
  }
  return impl;
}

}  // namespace

Tokenizer Tokenizer::from_json_text(std::string_view json_text, const std::string& label) {
  try {
    jf::Json root = jf::Json::parse(json_text.begin(), json_text.end());
    return Tokenizer(build(root, label));
  } catch (const jf::Json::exception& e) {
    // Structural problems the field checks did not anticipate still name the file.
    throw Error(label + ": invalid tokenizer JSON: " + e.what());
  }
}

Tokenizer Tokenizer::from_json(const nlohmann::json& root, const std::string& label) {
  try {
    return Tokenizer(build(root, label));
  } catch (const jf::Json::exception& e) {
    throw Error(label + ": invalid tokenizer JSON: " + e.what());
  }
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  std::filesystem::path file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) file = path / "tokenizer.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot read tokenizer file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(file.string() + ": read error");
  return from_json_text(ss.str(), file.string());
}

namespace {

// Invalid UTF-8 is read as U+FFFD, which can change byte offsets. With a scope of byte ranges,
// each piece between two range edges is sanitized on its own and the ranges are moved to the
// pieces' new places, so no replacement character ever straddles an edge.
std::string sanitize_scoped(std::string_view text, SpecialTokenScope& scope) {
  if (scope.is_everywhere() || scope.ranges().empty() || utf8::is_valid(text)) return utf8::sanitize(text);
  std::vector<size_t> edges{0, text.size()};
  for (const auto& r : scope.ranges()) {
    edges.push_back(std::min(r.begin, text.size()));
    edges.push_back(std::min(r.end, text.size()));
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::string out;
  std::vector<size_t> moved(edges.size());
  for (size_t i = 0; i < edges.size(); ++i) {
    moved[i] = out.size();
    if (i + 1 < edges.size()) out += utf8::sanitize(text.substr(edges[i], edges[i + 1] - edges[i]));
  }
  auto place = [&](size_t at) {
    at = std::min(at, text.size());
    return moved[static_cast<size_t>(std::lower_bound(edges.begin(), edges.end(), at) - edges.begin())];
  };
  std::vector<ByteRange> ranges;
  for (const auto& r : scope.ranges()) ranges.push_back({place(r.begin), place(r.end)});
  scope = SpecialTokenScope::within(ranges);
  return out;
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  return encode(text, parse_special ? SpecialTokenScope::everywhere() : SpecialTokenScope::nowhere());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const SpecialTokenScope& special_scope) const {
  const Impl& m = *impl_;
  SpecialTokenScope scope = special_scope;
  std::string clean = sanitize_scoped(text, scope);
  std::vector<int32_t> ids;
  bool at_text_start = true;
  for (const auto& segment : m.raw_added.split(clean, scope)) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
      at_text_start = false;
      continue;
    }
    std::string normalized = m.normalizer ? m.normalizer->normalize(segment.text) : segment.text;
    if (m.normalized_added.empty()) {
      m.encode_text(normalized, at_text_start, ids);
    } else {
      // Offsets in the normalized text are not offsets in `clean`: special tokens may match here
      // only when the scope allows the whole raw segment.
      const bool special_ok = scope.allows(segment.begin, segment.end);
      for (const auto& part : m.normalized_added.split(normalized, special_ok)) {
        if (part.added_id >= 0) {
          ids.push_back(part.added_id);
        } else {
          m.encode_text(part.text, at_text_start, ids);
        }
        at_text_start = false;
      }
    }
    at_text_start = false;
  }
  return ids;
}

std::string Tokenizer::decode_token_bytes(int32_t id, Decoder::State& state) const {
  return impl_->decoder.decode_token(token_text(id), state);
}

std::string Tokenizer::token_bytes(int32_t id) const {
  Decoder::State state;
  state.first_token = false;
  state.past_start = true;
  return decode_token_bytes(id, state);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  Decoder::State state;
  std::string bytes;
  for (int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    bytes += decode_token_bytes(id, state);
  }
  return utf8::sanitize(bytes);
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  std::string key(token);
  if (auto it = impl_->added_by_content.find(key); it != impl_->added_by_content.end()) return it->second;
  if (auto it = impl_->model.vocab().find(key); it != impl_->model.vocab().end()) return it->second;
  return std::nullopt;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size())
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                std::to_string(impl_->id_to_token.size()) + ")");
  return impl_->id_to_token[static_cast<size_t>(id)];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() && impl_->special[static_cast<size_t>(id)];
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->added.size() && impl_->added[static_cast<size_t>(id)];
}

size_t Tokenizer::vocab_size() const { return impl_->id_to_token.size(); }

}  // namespace keel::text
