#pragma once
// From a grammar's byte-level state to the set of tokens the model may sample next.
//
// A token is allowed when the matcher takes all of its bytes. Checking 151k tokens byte by byte
// at every step would cost more than the forward pass, so the work is split the way xgrammar's
// adaptive token-mask cache splits it. What a token does to the top frame of a stack (the string,
// number or object being written) depends only on that frame: the token is refused inside it,
// taken inside it, or reaches past its end into the frames below. The first two are computed once
// per distinct top frame, walking the vocabulary as a byte trie so that shared prefixes are read
// once; only the third kind (a few hundred tokens: those holding a closing quote and what follows
// it) is checked against the whole stack at each step. Frames whose behaviour is the same in every
// grammar (strings, numbers, whitespace) keep their masks in the Vocabulary, so they are computed
// once per model; the others in the TokenConstraint, once per request.
//
// Threads: a Vocabulary is built once and may be shared; its cache is guarded. A TokenConstraint
// belongs to one thread (the engine thread running the turn).
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "keel/constrain/grammar.h"
#include "keel/constrain/matcher.h"
#include "keel/text/tokenizer.h"

namespace keel::constrain {

// A set of token ids as bits, one per output row.
class TokenSet {
 public:
  explicit TokenSet(size_t rows = 0) : words_((rows + 63) / 64, 0), rows_(rows) {}
  void clear() { std::fill(words_.begin(), words_.end(), 0); }
  void set(int32_t id) { words_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
  bool test(int32_t id) const { return words_[static_cast<size_t>(id) >> 6] >> (id & 63) & 1; }
  TokenSet& operator|=(const TokenSet& other);
  size_t count() const;
  size_t rows() const { return rows_; }

 private:
  std::vector<uint64_t> words_;
  size_t rows_ = 0;
};

// What a token does to one top frame, for every token of the vocabulary.
struct FrameMask {
  TokenSet taken;                  // taken inside the frame: allowed whatever lies below it
  std::vector<int32_t> uncertain;  // reach past the frame's end: checked against the whole stack
  // For each uncertain token, where the frame has closed and every byte from there on is the
  // frames below's (kHandoffUnknown: the frame might also have gone on; check the whole token).
  std::vector<uint16_t> handoff;
  static constexpr uint16_t kHandoffUnknown = UINT16_MAX;
};

// What decides a top frame's mask: its node (or, for shared behaviour, its kind), its state, and
// what of `extra` matters (matcher.h).
struct FrameKey {
  uint32_t owner = 0;
  uint32_t state = 0;
  uint64_t extra = 0;
  bool operator==(const FrameKey&) const = default;
};
struct FrameKeyHash {
  size_t operator()(const FrameKey& k) const {
    return std::hash<uint64_t>()((uint64_t{k.owner} << 32 | k.state) * 0x9E3779B97F4A7C15ull ^ k.extra);
  }
};

// The model's tokens as the bytes they add to the output, arranged as a trie for the masks.
class Vocabulary {
 public:
  // `rows`: the model's output rows; ids with no token, added tokens (special or not: the
  // template's markup) and tokens that decode to nothing are never allowed inside a grammar (the
  // engine adds end-of-output tokens itself), except the added tokens `value_markup` names, which
  // are part of a value's syntax and count as their text (Gemma 4's <|"|> around a string).
  Vocabulary(const text::Tokenizer& tokenizer, size_t rows, std::span<const std::string_view> value_markup = {});

  size_t rows() const { return bytes_.size(); }
  std::string_view bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  size_t text_tokens() const { return sorted_.size(); }
  uint64_t id() const { return id_; }  // unique among the process's vocabularies

  // The mask of `frame` (the top of a stack), computed on first use.
  const FrameMask& frame_mask(const Matcher& matcher, const Frame& frame) const;
  // The same, with no cache: for grammar-specific frames (TokenConstraint caches those itself).
  FrameMask compute_frame_mask(const Matcher& matcher, const Frame& frame) const;
  // Every token a whole stack takes, by one walk of the trie (nothing uncertain).
  TokenSet compute_stack_mask(const Matcher& matcher, const Stack& stack) const;

  // Computes the masks every JSON value meets first (inside a string, the first digits of a
  // number, whitespace), which all grammars share, so the first constrained request of a server
  // does not pay for them between its tokens. Tens of milliseconds for a 151k vocabulary; a
  // server calls it at startup (Vocabulary itself is built lazily: ServedModel::vocabulary).
  void warm() const;

 private:
  struct Node {
    uint32_t first_edge = 0, edge_count = 0;
    uint32_t begin = 0, end = 0;  // the tokens at or below this node: sorted_[begin, end)
    uint32_t ending = 0;          // of those, the first `ending` end exactly here
  };
  uint32_t build(size_t begin, size_t end, size_t depth);
  // `top_only`: the stacks are a frame cut from a taller stack, and what reaches below it is
  // uncertain; else they are whole.
  void walk(const Matcher& matcher, uint32_t node, const std::vector<Stack>& stacks, FrameMask& mask, size_t depth,
            std::vector<std::vector<Stack>>& levels, bool top_only) const;

  uint64_t id_;
  std::vector<std::string> bytes_;
  std::vector<int32_t> sorted_;  // text tokens, by their bytes
  std::vector<Node> nodes_;
  std::vector<std::pair<uint8_t, uint32_t>> edges_;
  size_t max_depth_ = 0;  // bytes of the longest token

  mutable std::mutex mutex_;
  mutable std::unordered_map<FrameKey, std::unique_ptr<FrameMask>, FrameKeyHash> shared_;
};

// One grammar matched against one model's tokens, as the output is written.
class TokenConstraint {
 public:
  // `open_end` as for Matcher: a token may go on past the grammar's end.
  TokenConstraint(std::shared_ptr<const Grammar> grammar, const Vocabulary& vocabulary, bool open_end = false);

  // The tokens whose bytes the grammar takes next. Empty when nothing can follow (finished()) or
  // the output has left the grammar (failed()).
  void allowed(TokenSet& out);
  // Feeds a written token's bytes; false when the grammar refuses them (failed() from then on).
  bool accept(int32_t id);
  bool accept_bytes(std::string_view bytes);
  bool accepting() const { return matcher_.accepting(state_); }  // the text so far is complete
  bool finished() const { return matcher_.finished(state_); }    // and nothing may follow
  bool failed() const { return state_.failed(); }

 private:
  bool takes(const Stack& stack, std::string_view bytes) const;
  void add_uncertain(const Stack& stack, const FrameMask& mask, TokenSet& out);
  const FrameMask& mask_of(const Frame& frame);

  std::shared_ptr<const Grammar> grammar_;
  const Vocabulary* vocabulary_;
  Matcher matcher_;
  MatchState state_;
};

}  // namespace keel::constrain
