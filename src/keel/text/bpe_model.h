#pragma once
// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): a vocabulary, ranked merges, and
// the options byte-level (GPT-2 style) and SentencePiece-style (byte_fallback) files use.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "keel/text/json_fields.h"

namespace keel::text {

class BpeModel {
 public:
  static BpeModel from_json(const json_fields::Json& config, const std::string& where);

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  struct Symbol;

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::vector<Symbol> initial_symbols(std::string_view word) const;
  void merge(std::vector<Symbol>& symbols) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  std::vector<int32_t> byte_ids_;  // "<0xXX>" tokens when byte_fallback is on, else empty
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace keel::text
