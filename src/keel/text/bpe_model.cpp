#include "keel/text/bpe_model.h"

#include <cstdio>
#include <queue>

#include "keel/util/utf8.h"

namespace keel::text {

namespace jf = json_fields;

struct BpeModel::Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool alive;
};

BpeModel BpeModel::from_json(const json_fields::Json& config, const std::string& where) {
  BpeModel m;
  std::string type = jf::require_string(config, "type", where);
  if (type != "BPE") jf::fail(where + ".type", "unsupported model type \"" + type + "\" (keel supports BPE)");

  const auto& vocab = jf::require_object(jf::require(config, "vocab", where), where + ".vocab");
  m.vocab_.reserve(vocab.size());
  for (const auto& [token, id_json] : vocab.items()) {
    int64_t id = jf::as_int(id_json, where + ".vocab[\"" + token + "\"]");
    if (id < 0 || id > INT32_MAX) jf::fail(where + ".vocab[\"" + token + "\"]", "id out of range");
    m.vocab_[token] = static_cast<int32_t>(id);
  }

  m.continuing_subword_prefix_ = jf::optional_string(config, "continuing_subword_prefix", where).value_or("");
  m.end_of_word_suffix_ = jf::optional_string(config, "end_of_word_suffix", where).value_or("");
  m.fuse_unk_ = jf::optional_bool(config, "fuse_unk", false, where);
  m.ignore_merges_ = jf::optional_bool(config, "ignore_merges", false, where);

  for (int c = 0; c < 128; ++c) {
    auto it = m.vocab_.find(std::string(1, static_cast<char>(c)));
    m.ascii_ids_[c] = it == m.vocab_.end() ? -1 : it->second;
  }

  if (auto unk = jf::optional_string(config, "unk_token", where)) {
    auto it = m.vocab_.find(*unk);
    if (it == m.vocab_.end()) jf::fail(where + ".unk_token", "\"" + *unk + "\" is not in the vocabulary");
    m.unk_id_ = it->second;
  }

  if (jf::optional_bool(config, "byte_fallback", false, where)) {
    m.byte_ids_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      if (auto it = m.vocab_.find(name); it != m.vocab_.end()) m.byte_ids_[b] = it->second;
    }
  }

  const auto* merges = jf::find(config, "merges");
  if (merges) jf::require_array(*merges, where + ".merges");
  size_t count = merges ? merges->size() : 0;
  if (count > UINT32_MAX) jf::fail(where + ".merges", "too many merges");
  m.merges_.reserve(count);
  auto lookup = [&](const std::string& token, const std::string& at) {
    auto it = m.vocab_.find(token);
    if (it == m.vocab_.end()) jf::fail(at, "merge token \"" + token + "\" is not in the vocabulary");
    return it->second;
  };
  for (size_t i = 0; i < count; ++i) {
    std::string at = where + ".merges[" + std::to_string(i) + "]";
    const auto& entry = (*merges)[i];
    std::string left, right;
    if (entry.is_string()) {
      // Older files write "left right"; tokens never contain a plain space there.
      std::string s = entry.get<std::string>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        jf::fail(at, "expected two tokens separated by one space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2) {
      left = jf::as_string(entry[0], at + "[0]");
      right = jf::as_string(entry[1], at + "[1]");
    } else {
      jf::fail(at, "expected \"left right\" or [left, right]");
    }
    int32_t left_id = lookup(left, at);
    int32_t right_id = lookup(right, at);
    if (right.compare(0, m.continuing_subword_prefix_.size(), m.continuing_subword_prefix_) == 0)
      right.erase(0, m.continuing_subword_prefix_.size());
    int32_t result = lookup(left + right, at);
    // A repeated pair takes its last rank, as Hugging Face's loader does.
    m.merges_.insert_or_assign(left_id, right_id, {static_cast<uint32_t>(i), result});
  }
  return m;
}

std::vector<BpeModel::Symbol> BpeModel::initial_symbols(std::string_view word) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  bool previous_unk = false;
  auto push = [&](int32_t id) {
    symbols.push_back({id, static_cast<int32_t>(symbols.size()) - 1, -1, true});
  };
  std::string piece;
  for (size_t pos = 0; pos < word.size();) {
    size_t start = pos;
    utf8::decode_at(word, pos);
    auto first = static_cast<unsigned char>(word[start]);
    if (first < 0x80 && ascii_ids_[first] >= 0 && continuing_subword_prefix_.empty() && end_of_word_suffix_.empty()) {
      push(ascii_ids_[first]);
      previous_unk = false;
      continue;
    }
    piece.assign(word.substr(start, pos - start));
    if (start > 0) piece.insert(0, continuing_subword_prefix_);
    if (pos == word.size()) piece += end_of_word_suffix_;
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      push(it->second);
      previous_unk = false;
      continue;
    }
    if (!byte_ids_.empty()) {
      bool all_bytes = true;
      for (size_t i = start; i < pos; ++i) all_bytes = all_bytes && byte_ids_[static_cast<unsigned char>(word[i])] >= 0;
      if (all_bytes) {
        for (size_t i = start; i < pos; ++i) push(byte_ids_[static_cast<unsigned char>(word[i])]);
        previous_unk = false;
        continue;
      }
    }
    // Without an unknown token the character is dropped, as in Hugging Face's BPE.
    if (!unk_id_) continue;
    if (!(fuse_unk_ && previous_unk)) push(*unk_id_);
    previous_unk = true;
  }
  for (size_t i = 0; i + 1 < symbols.size(); ++i) symbols[i].next = static_cast<int32_t>(i + 1);
  return symbols;
}

void BpeModel::merge(std::vector<Symbol>& symbols) const {
  // Candidate merges ordered by rank, then position: the lowest-ranked pair anywhere in the word is
  // merged first, the leftmost on ties. Entries go stale when a neighbour changes and are
  // re-validated when popped.
  struct Candidate {
    uint32_t rank;
    int32_t left;
    int32_t right_id;
    int32_t result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = symbols[left].next;
    if (right < 0) return;
    if (auto m = merges_.find(symbols[left].id, symbols[right].id))
      queue.push({m->rank, left, symbols[right].id, m->result});
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) consider(static_cast<int32_t>(i));

  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    auto m = merges_.find(left.id, right.id);
    if (right.id != c.right_id || !m || m->rank != c.rank) continue;
    left.id = c.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> symbols = initial_symbols(word);
  merge(symbols);
  for (const auto& s : symbols)
    if (s.alive) out.push_back(s.id);
}

}  // namespace keel::text
