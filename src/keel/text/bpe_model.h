#pragma once
// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): a vocabulary, ranked merges, and
// the options byte-level (GPT-2 style) and SentencePiece-style (byte_fallback) files use.
// Immutable after from_json(): encode_word() and vocab() may be called from many threads at once; the
// caller owns `out`.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "keel/text/json_fields.h"
#include "keel/text/merge_table.h"

namespace keel::text {

class BpeModel {
 public:
  static BpeModel from_json(const json_fields::Json& config, const std::string& where);

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Symbol;

  std::vector<Symbol> initial_symbols(std::string_view word) const;
  void merge(std::vector<Symbol>& symbols) const;

  std::unordered_map<std::string, int32_t> vocab_;
  MergeTable merges_;
  std::optional<int32_t> unk_id_;
  std::vector<int32_t> byte_ids_;  // "<0xXX>" tokens when byte_fallback is on, else empty
  // Ids of single ASCII characters (-1 when absent), to skip a string hash for most characters.
  // Only used when no subword prefix/suffix decorates the characters.
  std::array<int32_t, 128> ascii_ids_{};
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace keel::text
