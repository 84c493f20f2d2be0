#include "keel/text/gguf_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "keel/util/error.h"

namespace keel::text {
namespace {

using nlohmann::json;

// llama.cpp's token types (llama_token_type).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kPre = "tokenizer.ggml.pre";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kTypes = "tokenizer.ggml.token_type";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kMerges = "tokenizer.ggml.merges";

// Typed metadata access on a parsed header, with gguf::File's error wording ("LABEL: key 'K': ...").
class Meta {
 public:
  Meta(const gguf::Header& h, const std::string& label) : h_(h), label_(label) {}

  [[noreturn]] void fail(std::string_view key, const std::string& problem) const {
    throw Error(label_ + ": key '" + std::string(key) + "': " + problem);
  }
  const gguf::Value* find(std::string_view key) const { return h_.find(key); }

  std::optional<std::string> string(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != gguf::ValueType::STRING) fail(key, "is a " + type_name(*v) + ", expected a string");
    return v->text;
  }
  std::optional<int64_t> integer(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_integer() || v->type == gguf::ValueType::BOOL) fail(key, "is a " + type_name(*v) + ", expected an integer");
    return v->integer;
  }
  std::optional<bool> boolean(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != gguf::ValueType::BOOL) fail(key, "is a " + type_name(*v) + ", expected a bool");
    return v->integer != 0;
  }
  const gguf::Value* array(std::string_view key, bool (*kind)(gguf::ValueType), const char* expected) const {
    const gguf::Value* v = find(key);
    if (!v) return nullptr;
    if (v->type != gguf::ValueType::ARRAY || !kind(v->element_type)) fail(key, std::string("is not an array of ") + expected);
    return v;
  }

 private:
  static std::string type_name(const gguf::Value& v) { return std::string(gguf::value_type_name(v.type)); }
  const gguf::Header& h_;
  const std::string& label_;
};

bool is_string_type(gguf::ValueType t) { return t == gguf::ValueType::STRING; }
bool is_integer_type(gguf::ValueType t) {
  return t != gguf::ValueType::F32 && t != gguf::ValueType::F64 && t != gguf::ValueType::STRING &&
         t != gguf::ValueType::ARRAY && t != gguf::ValueType::BOOL;
}
bool is_float_type(gguf::ValueType t) { return t == gguf::ValueType::F32 || t == gguf::ValueType::F64; }

// What one tokenizer.ggml.pre name stands for: the normalizer, pre-tokenizer and decoder of the
// tokenizer.json it was converted from. Split regexes are those files' own (Oniguruma syntax, which
// keel's Pattern reads); each is a Split with behavior Isolated, then ByteLevel without its regex.
struct PreRecipe {
  std::vector<std::string_view> names;  // the first is the canonical one, written by gguf_tokenizer_metadata
  bool nfc = false;
  std::vector<const char*> splits;  // empty: ByteLevel with GPT-2's own regex
  bool ignore_merges = false;       // a word already in the vocabulary is one token (Llama 3)
  bool add_bos = false;             // llama.cpp's default when the file does not say
};

const std::vector<PreRecipe>& pre_recipes() {
  static const std::vector<PreRecipe> recipes = {
      {{"qwen2"},
       true,
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       false,
       false},
      {{"llama-bpe", "llama3", "llama-v3"},
       false,
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true,
       true},
      {{"gpt-2"}, false, {}, false, false},
      {{"deepseek-llm"},
       false,
       {"[\r\n]",
        R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)",
        R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)",
        R"(\s+$)",
        R"([一-龥ࠀ-一가-퟿]+)",
        R"(\p{N}+)"},
       false,
       false},
      {{"deepseek-coder"},
       false,
       {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([一-龥ࠀ-一가-퟿]+)", R"(\p{N})"},
       false,
       false},
  };
  return recipes;
}

std::string recipe_names() {
  std::string out;
  for (const auto& r : pre_recipes())
    for (auto n : r.names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

json recipe_normalizer(const PreRecipe& r) { return r.nfc ? json{{"type", "NFC"}} : json(nullptr); }

json recipe_pre_tokenizer(const PreRecipe& r) {
  if (r.splits.empty()) return byte_level(true);
  json seq = json::array();
  for (const char* regex : r.splits)
    seq.push_back({{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
  seq.push_back(byte_level(false));
  return {{"type", "Sequence"}, {"pretokenizers", seq}};
}

const PreRecipe& find_recipe(const Meta& m, const std::string& pre) {
  for (const auto& r : pre_recipes())
    if (std::find(r.names.begin(), r.names.end(), pre) != r.names.end()) return r;
  m.fail(kPre, "'" + pre + "' is not supported for tokenizer.ggml.model 'gpt2' (supported: " + recipe_names() + ")");
}

struct Vocab {
  const std::vector<std::string>* tokens = nullptr;
  std::vector<int64_t> types;  // one per token, kNormal where the file has no token_type
  std::unordered_map<std::string_view, int32_t> ids;
};

Vocab read_vocab(const Meta& m) {
  Vocab v;
  const gguf::Value* tokens = m.array(kTokens, is_string_type, "strings");
  if (!tokens) m.fail(kTokens, "missing (the vocabulary)");
  v.tokens = &tokens->texts;
  const size_t n = v.tokens->size();
  if (n == 0) m.fail(kTokens, "is empty");
  if (n > (1u << 22)) m.fail(kTokens, "has " + std::to_string(n) + " tokens, more than keel's limit of 4194304");
  v.types.assign(n, kNormal);
  if (const gguf::Value* types = m.array(kTypes, is_integer_type, "integers")) {
    if (types->integers.size() != n)
      m.fail(kTypes, "has " + std::to_string(types->integers.size()) + " entries but " + kTokens + " has " + std::to_string(n));
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = types->integers[i];
      if (t < kNormal || t > kByte)
        m.fail(kTypes, "entry " + std::to_string(i) + " is " + std::to_string(t) +
                           " (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)");
      v.types[i] = t;
    }
  }
  v.ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = (*v.tokens)[i];
    // llama.cpp renames an empty token rather than matching it; keel leaves it out of the
    // vocabulary (it decodes to nothing and can never be produced).
    if (t.empty()) {
      if (v.types[i] == kControl || v.types[i] == kUserDefined || v.types[i] == kUnknown)
        m.fail(kTokens, "entry " + std::to_string(i) + " is an empty added token");
      continue;
    }
    auto [it, fresh] = v.ids.emplace(t, static_cast<int32_t>(i));
    if (!fresh)
      m.fail(kTokens, "entries " + std::to_string(it->second) + " and " + std::to_string(i) + " are both '" + t + "'");
  }
  return v;
}

std::optional<int32_t> token_id_key(const Meta& m, const Vocab& v, const std::string& key) {
  const auto id = m.integer(key);
  if (!id) return std::nullopt;
  if (*id < 0 || *id >= static_cast<int64_t>(v.tokens->size()))
    m.fail(key, std::to_string(*id) + " is outside the vocabulary (" + std::to_string(v.tokens->size()) + " tokens)");
  return static_cast<int32_t>(*id);
}

json vocab_object(const Vocab& v) {
  json vocab = json::object();
  for (size_t i = 0; i < v.tokens->size(); ++i)
    if (!(*v.tokens)[i].empty()) vocab[(*v.tokens)[i]] = static_cast<int64_t>(i);
  return vocab;
}

json added_tokens(const Vocab& v) {
  json added = json::array();
  for (size_t i = 0; i < v.tokens->size(); ++i) {
    const int64_t t = v.types[i];
    if (t != kControl && t != kUnknown && t != kUserDefined) continue;
    added.push_back({{"id", static_cast<int64_t>(i)},
                     {"content", (*v.tokens)[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", t != kUserDefined}});
  }
  return added;
}

// "left right" at the first space after the first byte (a token may itself begin with a space in
// a non-byte-level vocabulary, as llama.cpp allows), both halves and their concatenation tokens.
json bpe_merges(const Meta& m, const Vocab& v) {
  const gguf::Value* merges = m.array(kMerges, is_string_type, "strings");
  if (!merges) m.fail(kMerges, "missing (a \"gpt2\" tokenizer needs its merges)");
  json out = json::array();
  for (size_t i = 0; i < merges->texts.size(); ++i) {
    const std::string& s = merges->texts[i];
    auto bad = [&](const std::string& why) {
      m.fail(kMerges, "entry " + std::to_string(i) + " ('" + s + "'): " + why);
    };
    const size_t space = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= s.size()) bad("not two tokens separated by a space");
    std::string left = s.substr(0, space), right = s.substr(space + 1);
    if (!v.ids.count(left)) bad("'" + left + "' is not a token");
    if (!v.ids.count(right)) bad("'" + right + "' is not a token");
    if (!v.ids.count(left + right)) bad("'" + left + right + "' (the merged pair) is not a token");
    out.push_back(json::array({std::move(left), std::move(right)}));
  }
  return out;
}

// SentencePiece BPE has no merge list: every split of a piece into two pieces is a merge, ranked
// by the merged piece's score, highest first (ties by merged id, then left id).
json spm_merges(const Meta& m, const Vocab& v) {
  const gguf::Value* scores = m.array(kScores, is_float_type, "floats");
  if (!scores) m.fail(kScores, "missing (a \"llama\" tokenizer ranks its merges by the pieces' scores)");
  if (scores->numbers.size() != v.tokens->size())
    m.fail(kScores, "has " + std::to_string(scores->numbers.size()) + " entries but " + kTokens + " has " +
                        std::to_string(v.tokens->size()));
  struct Merge {
    double score;
    int32_t result, left, right;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < v.tokens->size(); ++id) {
    if (v.types[id] == kByte) continue;  // <0xNN> pieces stand for one byte; they are never merged into
    const std::string_view piece = (*v.tokens)[id];
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      if ((static_cast<unsigned char>(piece[cut]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      auto l = v.ids.find(piece.substr(0, cut));
      if (l == v.ids.end()) continue;
      auto r = v.ids.find(piece.substr(cut));
      if (r == v.ids.end()) continue;
      merges.push_back({scores->numbers[id], static_cast<int32_t>(id), l->second, r->second});
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.result != b.result) return a.result < b.result;
    return a.left < b.left;
  });
  json out = json::array();
  for (const auto& mg : merges)
    out.push_back(json::array({(*v.tokens)[static_cast<size_t>(mg.left)], (*v.tokens)[static_cast<size_t>(mg.right)]}));
  return out;
}

json metaspace_normalizer(bool add_space_prefix) {
  json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}};
  if (!add_space_prefix) return replace;
  return {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, replace}}};
}

json metaspace_decoder(bool add_space_prefix) {
  json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}};
  if (add_space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"type", "Sequence"}, {"decoders", decoders}};
}

std::string model_name(const Meta& m) {
  auto model = m.string(kModel);
  if (!model) m.fail(kModel, "missing (names the tokenizer type)");
  if (*model != "gpt2" && *model != "llama")
    m.fail(kModel, "'" + *model + "' is not supported (supported: gpt2 (byte-level BPE), llama (SentencePiece BPE))");
  return *model;
}

}  // namespace

std::string gguf_pre_tokenizer_list() { return recipe_names(); }

namespace {

json tokenizer_json(const Meta& m, const std::string& model, const Vocab& v) {
  json root;
  root["version"] = "1.0";
  root["added_tokens"] = added_tokens(v);
  if (model == "gpt2") {
    const auto pre = m.string(kPre);
    if (!pre) m.fail(kPre, "missing (names the pre-tokenizer; supported: " + recipe_names() + ")");
    const PreRecipe& r = find_recipe(m, *pre);
    root["normalizer"] = recipe_normalizer(r);
    root["pre_tokenizer"] = recipe_pre_tokenizer(r);
    root["decoder"] = byte_level(true);
    root["model"] = {{"type", "BPE"}, {"vocab", vocab_object(v)}, {"merges", bpe_merges(m, v)},
                     {"ignore_merges", r.ignore_merges}, {"byte_fallback", false}, {"fuse_unk", false}};
  } else {
    if (auto pre = m.string(kPre); pre && *pre != "default")
      m.fail(kPre, "'" + *pre + "' is not supported for tokenizer.ggml.model 'llama' (supported: default)");
    if (m.find(kMerges)) m.fail(kMerges, "present, but a \"llama\" (SentencePiece) tokenizer merges by its scores");
    const bool add_space_prefix = m.boolean("tokenizer.ggml.add_space_prefix").value_or(true);
    root["normalizer"] = metaspace_normalizer(add_space_prefix);
    root["pre_tokenizer"] = nullptr;
    root["decoder"] = metaspace_decoder(add_space_prefix);
    json bpe = {{"type", "BPE"}, {"vocab", vocab_object(v)}, {"merges", spm_merges(m, v)},
                {"byte_fallback", true}, {"fuse_unk", true}};
    std::optional<int32_t> unk = token_id_key(m, v, "tokenizer.ggml.unknown_token_id");
    for (size_t i = 0; !unk && i < v.types.size(); ++i)
      if (v.types[i] == kUnknown) unk = static_cast<int32_t>(i);
    if (unk && !(*v.tokens)[static_cast<size_t>(*unk)].empty()) bpe["unk_token"] = (*v.tokens)[static_cast<size_t>(*unk)];
    root["model"] = std::move(bpe);
  }
  return root;
}

}  // namespace

json gguf_tokenizer_json(const gguf::Header& header, const std::string& label) {
  const Meta m(header, label);
  const std::string model = model_name(m);
  return tokenizer_json(m, model, read_vocab(m));
}

GgufTokenizer load_gguf_tokenizer(const gguf::Header& header, const std::string& label) {
  const Meta m(header, label);
  const std::string model = model_name(m);
  const Vocab v = read_vocab(m);
  json root = tokenizer_json(m, model, v);
  GgufSpecialTokens s;
  s.bos = token_id_key(m, v, "tokenizer.ggml.bos_token_id");
  s.eos = token_id_key(m, v, "tokenizer.ggml.eos_token_id");
  s.eot = token_id_key(m, v, "tokenizer.ggml.eot_token_id");
  s.eom = token_id_key(m, v, "tokenizer.ggml.eom_token_id");
  s.unknown = token_id_key(m, v, "tokenizer.ggml.unknown_token_id");
  s.padding = token_id_key(m, v, "tokenizer.ggml.padding_token_id");
  std::string pre = model == "llama" ? "default" : m.string(kPre).value_or("");
  bool default_bos = model == "llama";
  if (model == "gpt2") default_bos = find_recipe(m, pre).add_bos;
  // A default never needs an id the file does not give (llama.cpp would assume id 1; keel assumes nothing).
  s.add_bos = m.boolean("tokenizer.ggml.add_bos_token").value_or(default_bos && s.bos.has_value());
  s.add_eos = m.boolean("tokenizer.ggml.add_eos_token").value_or(false);
  if (s.add_bos && !s.bos) m.fail("tokenizer.ggml.bos_token_id", "missing, but tokenizer.ggml.add_bos_token is true");
  if (s.add_eos && !s.eos) m.fail("tokenizer.ggml.eos_token_id", "missing, but tokenizer.ggml.add_eos_token is true");
  return GgufTokenizer{Tokenizer::from_json(root, label + " (GGUF tokenizer)"), model, std::move(pre), s};
}

GgufTokenizer load_gguf_tokenizer(const gguf::File& file) { return load_gguf_tokenizer(file.header(), file.path().string()); }

namespace {

[[noreturn]] void refuse_json(const std::string& label, const std::string& field, const std::string& why) {
  throw Error(label + ": " + field + ": " + why + " (a GGUF tokenizer can be written for byte-level BPE files whose "
              "pre-tokenizer is one of: " + recipe_names() + ")");
}

// trim_offsets is about offsets, not ids: two pre-tokenizers that differ only there are the same.
json without_offsets(json j) {
  if (j.is_object()) {
    j.erase("trim_offsets");
    for (auto& [key, value] : j.items()) value = without_offsets(value);
  } else if (j.is_array()) {
    for (auto& e : j) e = without_offsets(e);
  }
  return j;
}

}  // namespace

GgufTokenizerMetadata gguf_tokenizer_metadata(const json& tj, const std::string& label) {
  if (!tj.is_object()) refuse_json(label, "(root)", "not an object");
  if (!tj.contains("model") || !tj["model"].is_object() || tj["model"].value("type", "") != "BPE")
    refuse_json(label, "model.type", "not BPE");
  const json& model = tj["model"];
  if (model.value("byte_fallback", false)) refuse_json(label, "model.byte_fallback", "set (SentencePiece-style BPE)");
  const json normalizer = tj.contains("normalizer") ? tj["normalizer"] : json(nullptr);
  const json pre = without_offsets(tj.contains("pre_tokenizer") ? tj["pre_tokenizer"] : json(nullptr));
  const PreRecipe* chosen = nullptr;
  for (const auto& r : pre_recipes())
    if (normalizer == recipe_normalizer(r) && pre == without_offsets(recipe_pre_tokenizer(r)) &&
        model.value("ignore_merges", false) == r.ignore_merges)
      chosen = &r;
  if (!chosen) refuse_json(label, "pre_tokenizer", "matches no tokenizer.ggml.pre keel knows");

  GgufTokenizerMetadata out;
  out.model = "gpt2";
  out.pre = std::string(chosen->names.front());
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;
  if (!model.contains("vocab") || !model["vocab"].is_object()) refuse_json(label, "model.vocab", "missing");
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) refuse_json(label, "model.vocab[\"" + token + "\"]", "not an id");
    by_id[id.get<int64_t>()] = {token, kNormal};
  }
  if (tj.contains("added_tokens") && tj["added_tokens"].is_array())
    for (const auto& t : tj["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string())
        refuse_json(label, "added_tokens", "an entry lacks an id or content");
      if (t.value("lstrip", false) || t.value("rstrip", false) || t.value("single_word", false) || t.value("normalized", false))
        refuse_json(label, "added_tokens", "'" + t["content"].get<std::string>() +
                                               "' has lstrip, rstrip, single_word or normalized set, which GGUF cannot say");
      by_id[t["id"].get<int64_t>()] = {t["content"].get<std::string>(), t.value("special", false) ? kControl : kUserDefined};
    }
  // GGUF's tokens are dense; a gap in the file's ids is refused rather than filled with a made-up name.
  int64_t expected = 0;
  for (auto& [id, entry] : by_id) {
    if (id != expected) refuse_json(label, "model.vocab", "no token has id " + std::to_string(expected));
    out.tokens.push_back(std::move(entry.first));
    out.token_types.push_back(entry.second);
    ++expected;
  }
  if (model.contains("merges") && model["merges"].is_array())
    for (const auto& mg : model["merges"]) {
      if (mg.is_string()) {
        out.merges.push_back(mg.get<std::string>());
      } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
        out.merges.push_back(mg[0].get<std::string>() + " " + mg[1].get<std::string>());
      } else {
        refuse_json(label, "model.merges", "an entry is neither \"left right\" nor [left, right]");
      }
    }
  return out;
}

}  // namespace keel::text
