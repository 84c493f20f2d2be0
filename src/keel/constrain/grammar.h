#pragma once
// A grammar over bytes, as a graph of nodes a pushdown matcher (matcher.h) walks: JSON values
// shaped by a schema (json_schema.h), wrapped in fixed text where a tool-call format needs it.
// Nodes refer to each other by index, so a recursive schema ($ref) is a cycle, not a copy.
//
// Threads: built once (json_schema.cpp, on the request's thread), then read-only and shared;
// only its mask cache changes (token_mask.cpp, under its lock).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace keel::constrain {

// The children of a trie node over sorted strings: of the strings [begin, end), which share their
// first `depth` bytes, the runs that share the next byte too (strings ending at `depth` are the
// node's own and belong to no run). Used by ByteTrie and the vocabulary's token trie.
struct ByteRun {
  uint8_t byte;
  size_t begin, end;
};
template <class BytesOf>  // BytesOf(i) -> the i-th string (std::string_view)
std::vector<ByteRun> runs_by_next_byte(size_t begin, size_t end, size_t depth, BytesOf bytes_of) {
  std::vector<ByteRun> runs;
  for (size_t i = begin; i < end; ++i) {
    const std::string_view s = bytes_of(i);
    if (s.size() == depth) continue;
    const auto byte = static_cast<uint8_t>(s[depth]);
    if (runs.empty() || runs.back().byte != byte) runs.push_back({byte, i, i});
    runs.back().end = i + 1;
  }
  return runs;
}

// A set of byte strings as a trie: enum and const texts, or an object's property names (their
// JSON-escaped bodies, without the quotes). Node 0 is the root; a node's edges are contiguous and
// sorted by byte.
class ByteTrie {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Node {
    uint32_t first_edge = 0;
    uint32_t edge_count = 0;
    uint32_t terminal = kNone;  // index of the string that ends here
    uint64_t below = 0;         // bit i: string i (< 64) ends here or deeper
    uint8_t string_state = 0;   // the String automaton's state after this node's bytes (keys only)
  };

  ByteTrie() = default;
  // `strings` need not be sorted; duplicates are one string (the first index).
  explicit ByteTrie(const std::vector<std::string>& strings);

  uint32_t child(uint32_t node, uint8_t byte) const;  // kNone when there is no such edge
  const Node& node(uint32_t i) const { return nodes_[i]; }
  Node& node(uint32_t i) { return nodes_[i]; }
  size_t size() const { return nodes_.size(); }
  size_t strings() const { return strings_; }
  // Sets every node's string_state: the strings are JSON string bodies (property names).
  void mark_string_states();

 private:
  uint32_t build(const std::vector<std::pair<std::string, uint32_t>>& sorted, size_t begin, size_t end, size_t depth);
  std::vector<Node> nodes_;
  std::vector<std::pair<uint8_t, uint32_t>> edges_;
  size_t strings_ = 0;
};

enum class NodeKind : uint8_t {
  Literals,    // one of a set of exact texts (enum, const, true/false/null, fixed markup)
  String,      // a JSON string
  Number,      // a JSON number
  Integer,     // a JSON number without fraction or exponent
  Object,      // a JSON object: declared properties in any order, each at most once
  Array,       // a JSON array
  Choice,      // any one of `children` (anyOf, oneOf, a type list); never a frame of its own
  Sequence,    // `children` one after another
  Whitespace,  // optional JSON whitespace, as between two JSON tokens (kMaxIndent)
  Text,        // raw UTF-8 text up to and including the first `terminator` (an XML parameter's value)
};

// Whitespace between JSON tokens is what JSON writers produce: nothing, one space, or a newline
// and up to kMaxIndent spaces or tabs of indentation. A model cannot spend its tokens on blank
// space (Qwen's vocabulary has single tokens of 24 spaces), and a pretty-printed document a few
// levels deep still fits.
inline constexpr uint32_t kMaxIndent = 20;
// Digits of an integer part, a fraction or an exponent: past these a number must end.
inline constexpr uint32_t kMaxIntegerDigits = 18;  // every such integer fits in 64 bits
inline constexpr uint32_t kMaxFractionDigits = 20;
inline constexpr uint32_t kMaxExponentDigits = 2;  // with the digits above, every number fits a double
// An object frame records which declared properties it has seen in 64 bits.
inline constexpr size_t kMaxProperties = 64;

struct GrammarNode {
  NodeKind kind = NodeKind::Literals;
  ByteTrie trie;                   // Literals: the texts. Object: the property names.
  std::vector<uint32_t> children;  // Choice, Sequence. Object: the value node of property i.
  uint64_t required = 0;           // Object: bit i set when property i is required
  uint32_t additional = ByteTrie::kNone;  // Object: the value node of undeclared keys; kNone: none allowed
  uint32_t key_string = ByteTrie::kNone;  // Object with `additional`: a String node an undeclared key is read by
  uint32_t items = 0;                      // Array: the item node
  uint32_t min_items = 0, max_items = UINT32_MAX;
  std::string terminator;  // Text: ASCII, at most 15 bytes; the text cannot contain it before its end
  std::string excluded;    // Text: ASCII bytes the text cannot hold (a bare key's delimiters)
  // Object: keys are written bare and end at ':' (Gemma 4); `key_string` then reads an undeclared
  // key together with its ':'.
  bool bare_keys = false;
};

// How values are written. Json: JSON. Gemma: Gemma 4's call arguments, {key:value,...} with bare
// keys and strings between <|"|> markers taken as raw text; numbers, true, false, null and
// arrays as in JSON.
enum class ValueSyntax : uint8_t { Json, Gemma };
inline constexpr std::string_view kGemmaQuote = "<|\"|>";

struct GrammarMaskCache;  // token_mask.cpp

struct Grammar {
  std::vector<GrammarNode> nodes;
  uint32_t root = 0;
  ValueSyntax syntax = ValueSyntax::Json;  // of the values schemas compile into (json_schema.h)
  // Schema keywords that were accepted but that the grammar does not enforce (minLength, pattern,
  // minimum, ...), by their path: the caller decides whether validation after the fact covers them.
  std::vector<std::string> unenforced;
  // Nodes every schema in the grammar shares (json_schema.cpp); kNone until first needed.
  uint32_t any_value = ByteTrie::kNone;
  uint32_t string_value = ByteTrie::kNone;
  uint32_t number_value = ByteTrie::kNone;
  uint32_t integer_value = ByteTrie::kNone;
  // The token masks of this grammar's own frames, filled as TokenConstraints meet them, so a
  // grammar reused across requests (an agent's tool set) computes each once. Engine thread.
  mutable std::shared_ptr<GrammarMaskCache> masks;

  uint32_t add(GrammarNode node) {
    nodes.push_back(std::move(node));
    return static_cast<uint32_t>(nodes.size() - 1);
  }
  // Helpers for fixed markup around a schema's value.
  uint32_t add_literal(std::string_view text);
  uint32_t add_sequence(std::vector<uint32_t> parts);
  uint32_t add_whitespace();
  uint32_t add_text(std::string terminator, std::string excluded = {});
};

}  // namespace keel::constrain
