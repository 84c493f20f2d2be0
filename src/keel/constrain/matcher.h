#pragma once
// Walks a Grammar byte by byte: a pushdown automaton whose stack holds one frame per value being
// written (an object, the string inside it, ...). Where an anyOf is still undecided the matcher
// holds one stack per alternative and drops those the bytes rule out, so its answer is exact for
// every grammar, ambiguous ones included.
//
// Threads: a Matcher only reads its grammar, so any number of threads may share one; a MatchState
// belongs to one thread.
#include <compare>
#include <cstdint>
#include <string_view>
#include <vector>

#include "keel/constrain/grammar.h"

namespace keel::constrain {

struct Frame {
  uint32_t node = 0;
  uint32_t state = 0;  // what the frame has seen, per kind (matcher.cpp)
  uint64_t extra = 0;  // Object: the declared properties seen (bit per property). Array: items begun.
  auto operator<=>(const Frame&) const = default;
};

using Stack = std::vector<Frame>;  // bottom first; empty: the grammar's text is complete

// Every stack the bytes so far can have led to. Empty: the bytes left the grammar.
struct MatchState {
  std::vector<Stack> stacks;
  bool failed() const { return stacks.empty(); }
};

// More undecided alternatives than this at once and the matcher gives up (advance returns false):
// only a pathological schema (anyOf nested in anyOf many levels deep) gets there.
inline constexpr size_t kMaxStacks = 512;

// A JSON string's body (after its opening quote) as a little automaton: state 0 lies between
// characters; the others are inside a UTF-8 sequence, an escape or a \u escape. Returns the next
// state, kStringClosed for the closing quote (from state 0), or kStringRefused. Refused: control
// bytes, invalid or overlong UTF-8, surrogates (also as \u escapes, which JSON parsers reject
// unpaired), unknown escapes.
inline constexpr uint8_t kStringClosed = 0xFE;
inline constexpr uint8_t kStringRefused = 0xFF;
uint8_t string_body_step(uint8_t state, uint8_t byte);

class Matcher {
 public:
  // `open_end`: once the grammar's text is complete, any bytes may follow (and are not read): a
  // tool call's grammar ends where the call does, and the token that closes it may carry the
  // format's next markup ("}}\n").
  explicit Matcher(const Grammar& grammar, bool open_end = false);

  const Grammar& grammar() const { return *grammar_; }
  MatchState start() const;
  // Feeds bytes; false when the grammar does not allow them (the state is then failed()).
  bool advance(MatchState& state, uint8_t byte) const;
  bool advance(MatchState& state, std::string_view bytes) const;
  // The bytes so far are a whole text of the grammar (it may still allow more: "12" -> "123").
  bool accepting(const MatchState& state) const;
  // No byte can follow (the document's last value has closed).
  bool finished(const MatchState& state) const;

  // One stack and one byte: appends what the stack becomes (several when an anyOf opens, none
  // when the byte is refused). With `needs_parent` non-null the stack is read as the top of a
  // taller one: a byte its bottom frame passes on sets *needs_parent instead of being refused.
  void feed(Stack stack, uint8_t byte, std::vector<Stack>& out, bool* needs_parent = nullptr) const;

  // The frame's behaviour does not depend on which node it belongs to (strings, numbers,
  // whitespace): token masks for it can be shared by every grammar over one vocabulary.
  bool shared_behaviour(const Frame& frame) const;

 private:
  struct Step;
  Step consume(Frame& frame, uint8_t byte) const;
  static Step take_space(Frame& frame, uint8_t byte);
  Step bare_key_byte(Frame& frame, const GrammarNode& node, uint32_t trie_node, uint8_t byte) const;
  void push(Stack stack, uint32_t node, uint32_t state, uint8_t byte, std::vector<Stack>& out, bool* needs_parent,
            int depth) const;
  void feed_at(Stack stack, uint8_t byte, std::vector<Stack>& out, bool* needs_parent, int depth) const;
  void expand(Stack stack, uint32_t node, std::vector<Stack>& out) const;
  bool can_end(const Frame& frame) const;
  bool keys_left(const GrammarNode& node, uint64_t seen) const;
  bool key_live(const GrammarNode& node, uint32_t trie_node, uint64_t seen) const;

  const Grammar* grammar_;
  bool open_end_ = false;
  std::vector<bool> nullable_;  // the node can match no bytes at all
};

}  // namespace keel::constrain
