#include "keel/constrain/matcher.h"

#include <algorithm>

#include "keel/util/error.h"

namespace keel::constrain {
namespace {

bool is_space(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
bool is_hex(uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

// Object frames: phase in bits 0-3, whitespace (space_step) in bits 4-8, the rest (`sub`) in bits 9-31:
// the key trie's node while a declared name is being written, else the property whose key or
// value comes next (kAdditional: an undeclared key's).
enum ObjectPhase : uint32_t { kOpen, kFirstKey, kInKey, kAfterKey, kBeforeValue, kAfterValue, kNextKey };
// Array frames: phase in bits 0-3 and the whitespace in bits 4-8; the items begun in `extra`.
enum ArrayPhase : uint32_t { kArrayOpen, kFirstItem, kAfterItem, kNextItem };
// Number frames: phase in bits 0-3, digits of the current part in bits 4-11.
enum NumberPhase : uint32_t { kStart, kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };
constexpr uint32_t kAdditional = (1u << 23) - 1;

// Whitespace between JSON tokens (grammar.h): 0 none yet, 1 one space (no more), 2 + n a newline
// and n indentation bytes. Returns the next state, or kNoSpace when `b` cannot continue it.
constexpr uint32_t kNoSpace = UINT32_MAX;
uint32_t space_step(uint32_t state, uint8_t b) {
  if (state == 0) return b == ' ' ? 1 : b == '\n' ? 2 : kNoSpace;
  if (state >= 2 && (b == ' ' || b == '\t') && state - 2 < kMaxIndent) return state + 1;
  return kNoSpace;
}

uint32_t phase(uint32_t state) { return state & 0xF; }
uint32_t spaces(uint32_t state) { return (state >> 4) & 0x1F; }
uint32_t sub(uint32_t state) { return state >> 9; }
uint32_t make(uint32_t phase, uint32_t sub = 0, uint32_t spaces = 0) { return phase | (spaces << 4) | (sub << 9); }
uint32_t number(uint32_t phase, uint32_t digits = 0) { return phase | (digits << 4); }
uint32_t digits(uint32_t state) { return state >> 4; }

}  // namespace

uint8_t string_body_step(uint8_t state, uint8_t b) {
  switch (state) {
    case 0:
      if (b == '"') return kStringClosed;
      if (b == '\\') return 8;
      if (b < 0x20) return kStringRefused;
      if (b < 0x80) return 0;
      if (b >= 0xC2 && b <= 0xDF) return 1;
      if (b == 0xE0) return 4;
      if (b == 0xED) return 5;
      if (b >= 0xE1 && b <= 0xEF) return 2;
      if (b == 0xF0) return 6;
      if (b >= 0xF1 && b <= 0xF3) return 3;
      if (b == 0xF4) return 7;
      return kStringRefused;
    case 1: return b >= 0x80 && b <= 0xBF ? 0 : kStringRefused;
    case 2: return b >= 0x80 && b <= 0xBF ? 1 : kStringRefused;
    case 3: return b >= 0x80 && b <= 0xBF ? 2 : kStringRefused;
    case 4: return b >= 0xA0 && b <= 0xBF ? 1 : kStringRefused;  // E0: no overlong forms
    case 5: return b >= 0x80 && b <= 0x9F ? 1 : kStringRefused;  // ED: no surrogates
    case 6: return b >= 0x90 && b <= 0xBF ? 2 : kStringRefused;  // F0: no overlong forms
    case 7: return b >= 0x80 && b <= 0x8F ? 2 : kStringRefused;  // F4: nothing past U+10FFFF
    case 8:  // after a backslash
      if (b == 'u') return 9;
      return std::string_view("\"\\/bfnrt").find(static_cast<char>(b)) != std::string_view::npos ? 0 : kStringRefused;
    case 9:  // \u: first hex digit; a D may begin a surrogate
      if (!is_hex(b)) return kStringRefused;
      return b == 'd' || b == 'D' ? 13 : 10;
    case 10: return is_hex(b) ? 11 : kStringRefused;
    case 11: return is_hex(b) ? 12 : kStringRefused;
    case 12: return is_hex(b) ? 0 : kStringRefused;
    case 13: return (is_digit(b) && b <= '7') ? 11 : kStringRefused;  // \uD800-\uDFFF refused
    default: return kStringRefused;
  }
}

namespace {

// Raw text (Text nodes) is UTF-8 as a string's body is, but quotes and backslashes are plain
// characters and newlines, tabs and carriage returns are allowed; other control bytes are not.
uint8_t text_step(uint8_t state, uint8_t b) {
  if (state == 0 && (b == '"' || b == '\\')) return 0;
  if (state == 0 && b < 0x20) return b == '\n' || b == '\t' || b == '\r' ? 0 : kStringRefused;
  return string_body_step(state, b);
}

}  // namespace

// What one byte does to the top frame.
struct Matcher::Step {
  enum Kind { Refuse, Consumed, Done, Pass, Push } kind;
  uint32_t node = 0;   // Push: the node to enter, then feed the byte to
  uint32_t state = 0;  // Push: the entered frame's state
};

Matcher::Matcher(const Grammar& grammar, bool open_end)
    : grammar_(&grammar), open_end_(open_end), nullable_(grammar.nodes.size(), false) {
  // Least fixpoint: Whitespace is nullable; a Sequence of nullables and a Choice of one are too.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < grammar.nodes.size(); ++i) {
      if (nullable_[i]) continue;
      const GrammarNode& n = grammar.nodes[i];
      bool now = false;
      if (n.kind == NodeKind::Whitespace) now = true;
      if (n.kind == NodeKind::Sequence)
        now = std::all_of(n.children.begin(), n.children.end(), [&](uint32_t c) { return nullable_[c]; });
      if (n.kind == NodeKind::Choice)
        now = std::any_of(n.children.begin(), n.children.end(), [&](uint32_t c) { return nullable_[c]; });
      if (now) nullable_[i] = changed = true;
    }
  }
}

bool Matcher::keys_left(const GrammarNode& node, uint64_t seen) const {
  return node.additional != ByteTrie::kNone || (node.trie.size() > 0 && (node.trie.node(0).below & ~seen) != 0);
}

bool Matcher::key_live(const GrammarNode& node, uint32_t trie_node, uint64_t seen) const {
  return node.additional != ByteTrie::kNone || (node.trie.node(trie_node).below & ~seen) != 0;
}

// Whitespace between an object's or array's tokens: the phase and `sub` stay, the whitespace
// state moves on (or the byte is refused).
Matcher::Step Matcher::take_space(Frame& f, uint8_t b) {
  const uint32_t next = space_step(spaces(f.state), b);
  if (next == kNoSpace) return {Step::Refuse};
  f.state = make(phase(f.state), sub(f.state), next);
  return {Step::Consumed};
}

// A byte of a bare key (Gemma 4): a declared name while it can still become one, ended by ':';
// off the names, an undeclared key read on by `key_string` (its ':' included).
Matcher::Step Matcher::bare_key_byte(Frame& f, const GrammarNode& node, uint32_t trie_node, uint8_t b) const {
  const ByteTrie::Node& at = node.trie.node(trie_node);
  if (b == ':' && trie_node != 0 && at.terminal != ByteTrie::kNone) {
    if (f.extra >> at.terminal & 1) return {Step::Refuse};  // a declared key twice
    f.state = make(kBeforeValue, at.terminal);
    return {Step::Consumed};
  }
  const uint32_t next = node.trie.child(trie_node, b);
  if (next != ByteTrie::kNone && key_live(node, next, f.extra)) {
    f.state = make(kInKey, next);
    return {Step::Consumed};
  }
  if (node.additional == ByteTrie::kNone || (b == ':' && trie_node == 0)) return {Step::Refuse};  // no empty key
  f.state = make(kBeforeValue, kAdditional);
  return {Step::Push, node.key_string, 0};
}

Matcher::Step Matcher::consume(Frame& f, uint8_t b) const {
  const GrammarNode& node = grammar_->nodes[f.node];
  using K = Step::Kind;
  switch (node.kind) {
    case NodeKind::Literals: {
      const uint32_t next = node.trie.child(f.state, b);
      if (next != ByteTrie::kNone) {
        const ByteTrie::Node& n = node.trie.node(next);
        if (n.edge_count == 0) return {K::Done};
        f.state = next;
        return {K::Consumed};
      }
      return node.trie.node(f.state).terminal != ByteTrie::kNone ? Step{K::Pass} : Step{K::Refuse};
    }
    case NodeKind::String: {
      if (f.state == 0) {
        if (b != '"') return {K::Refuse};
        f.state = 1;
        return {K::Consumed};
      }
      const uint8_t next = string_body_step(static_cast<uint8_t>(f.state - 1), b);
      if (next == kStringRefused) return {K::Refuse};
      if (next == kStringClosed) return {K::Done};
      f.state = 1u + next;
      return {K::Consumed};
    }
    case NodeKind::Number:
    case NodeKind::Integer: {
      const bool real = node.kind == NodeKind::Number;
      const uint32_t p = phase(f.state), n = digits(f.state);
      auto to = [&](uint32_t state) {
        f.state = state;
        return Step{K::Consumed};
      };
      // After a complete integer part: a fraction or exponent may follow (numbers only).
      auto after_integer = [&]() {
        if (real && b == '.') return to(number(kDot));
        if (real && (b == 'e' || b == 'E')) return to(number(kExp));
        return Step{K::Pass};
      };
      switch (p) {
        case kStart:
          if (b == '-') return to(number(kMinus));
          [[fallthrough]];
        case kMinus:
          if (b == '0') return to(number(kZero));
          if (is_digit(b)) return to(number(kInt, 1));
          return {K::Refuse};
        case kZero: return after_integer();
        case kInt:
          if (is_digit(b)) return n < kMaxIntegerDigits ? to(number(kInt, n + 1)) : Step{K::Pass};
          return after_integer();
        case kDot: return is_digit(b) ? to(number(kFrac, 1)) : Step{K::Refuse};
        case kFrac:
          if (is_digit(b)) return n < kMaxFractionDigits ? to(number(kFrac, n + 1)) : Step{K::Pass};
          if (b == 'e' || b == 'E') return to(number(kExp));
          return {K::Pass};
        case kExp:
          if (b == '+' || b == '-') return to(number(kExpSign));
          [[fallthrough]];
        case kExpSign: return is_digit(b) ? to(number(kExpDigits, 1)) : Step{K::Refuse};
        case kExpDigits:
          if (is_digit(b)) return n < kMaxExponentDigits ? to(number(kExpDigits, n + 1)) : Step{K::Pass};
          return {K::Pass};
      }
      return {K::Refuse};
    }
    case NodeKind::Text: {
      // State: the UTF-8 state in bits 0-3, the terminator's bytes matched so far above them.
      const std::string_view end = node.terminator;
      const uint32_t utf8 = f.state & 0xF, matched = f.state >> 4;
      if (utf8 == 0 && b == static_cast<uint8_t>(end[matched])) {
        if (matched + 1 == end.size()) return {K::Done};
        f.state = (matched + 1) << 4;
        return {K::Consumed};
      }
      if (utf8 == 0 && node.excluded.find(static_cast<char>(b)) != std::string::npos) return {K::Refuse};
      const uint8_t next = text_step(static_cast<uint8_t>(utf8), b);
      if (next == kStringRefused) return {K::Refuse};
      // The bytes matched were text after all, and so is b: what is matched now is the longest
      // start of the terminator that the text ends with.
      uint32_t now = 0;
      for (uint32_t k = std::min<uint32_t>(matched, static_cast<uint32_t>(end.size()) - 1); k > 0 && next == 0; --k)
        if (end[k - 1] == static_cast<char>(b) && end.substr(matched + 1 - k, k - 1) == end.substr(0, k - 1)) {
          now = k;
          break;
        }
      f.state = next | (now << 4);
      return {K::Consumed};
    }
    case NodeKind::Whitespace:
      if (const uint32_t next = space_step(f.state, b); next != kNoSpace) {
        f.state = next;
        return {K::Consumed};
      }
      return {K::Pass};
    case NodeKind::Sequence:
      if (f.state >= node.children.size()) return {K::Pass};
      ++f.state;
      return {K::Push, node.children[f.state - 1]};
    case NodeKind::Choice:
      throw InternalError("constrain: a Choice node became a frame");
    case NodeKind::Object: {
      const uint32_t p = phase(f.state);
      const uint32_t s = sub(f.state);
      // Whitespace where JSON allows it, up to the bound.
      if (p != kOpen && p != kInKey && is_space(b)) return take_space(f, b);
      const bool complete = (node.required & ~f.extra) == 0;
      switch (p) {
        case kOpen:
          if (b != '{') return {K::Refuse};
          f.state = make(kFirstKey);
          return {K::Consumed};
        case kFirstKey:
        case kNextKey:
          if (b == '}' && p == kFirstKey && complete) return {K::Done};
          if (!keys_left(node, f.extra)) return {K::Refuse};
          if (node.bare_keys) return bare_key_byte(f, node, 0, b);
          if (b != '"') return {K::Refuse};
          f.state = make(kInKey, 0);
          return {K::Consumed};
        case kInKey: {
          if (node.bare_keys) return bare_key_byte(f, node, s, b);
          const ByteTrie::Node& at = node.trie.node(s);
          if (b == '"' && at.string_state == 0) {
            if (at.terminal != ByteTrie::kNone) {
              if (f.extra >> at.terminal & 1) return {K::Refuse};  // a declared key twice
              f.state = make(kAfterKey, at.terminal);
              return {K::Consumed};
            }
            if (node.additional == ByteTrie::kNone) return {K::Refuse};
            f.state = make(kAfterKey, kAdditional);
            return {K::Consumed};
          }
          const uint32_t next = node.trie.child(s, b);
          if (next != ByteTrie::kNone && key_live(node, next, f.extra)) {
            f.state = make(kInKey, next);
            return {K::Consumed};
          }
          if (node.additional == ByteTrie::kNone) return {K::Refuse};
          // Off the declared names: an undeclared key, read on as a string from where it is.
          f.state = make(kAfterKey, kAdditional);
          return {K::Push, node.key_string, 1u + at.string_state};
        }
        case kAfterKey:
          if (b != ':') return {K::Refuse};
          f.state = make(kBeforeValue, s);
          return {K::Consumed};
        case kBeforeValue:
          f.state = make(kAfterValue);
          if (s == kAdditional) return {K::Push, node.additional};
          f.extra |= uint64_t{1} << s;
          return {K::Push, node.children[s]};
        case kAfterValue:
          if (b == '}' && complete) return {K::Done};
          if (b == ',' && keys_left(node, f.extra)) {
            f.state = make(kNextKey);
            return {K::Consumed};
          }
          return {K::Refuse};
      }
      return {K::Refuse};
    }
    case NodeKind::Array: {
      const uint32_t p = phase(f.state);
      if (p != kArrayOpen && is_space(b)) return take_space(f, b);
      switch (p) {
        case kArrayOpen:
          if (b != '[') return {K::Refuse};
          f.state = make(kFirstItem);
          return {K::Consumed};
        case kFirstItem:
          if (b == ']' && node.min_items == 0) return {K::Done};
          if (node.max_items == 0) return {K::Refuse};
          [[fallthrough]];
        case kNextItem:
          f.state = make(kAfterItem);
          ++f.extra;
          return {K::Push, node.items};
        case kAfterItem:
          if (b == ']' && f.extra >= node.min_items) return {K::Done};
          if (b == ',' && f.extra < node.max_items) {
            f.state = make(kNextItem);
            return {K::Consumed};
          }
          return {K::Refuse};
      }
      return {K::Refuse};
    }
  }
  return {K::Refuse};
}

// Recursion through Choice and Sequence nodes that consume nothing is bounded by the grammar's
// size (json_schema.cpp refuses cycles of them); this guards against a grammar built otherwise.
constexpr int kMaxPushDepth = 256;

void Matcher::push(Stack stack, uint32_t node, uint32_t state, uint8_t b, std::vector<Stack>& out,
                   bool* needs_parent, int depth) const {
  if (depth > kMaxPushDepth) throw InternalError("constrain: the grammar recurses without consuming input");
  const GrammarNode& n = grammar_->nodes[node];
  if (n.kind == NodeKind::Choice) {
    for (uint32_t alternative : n.children) push(stack, alternative, 0, b, out, needs_parent, depth + 1);
    return;
  }
  stack.push_back(Frame{node, state, 0});
  feed_at(std::move(stack), b, out, needs_parent, depth + 1);
}

void Matcher::feed(Stack stack, uint8_t b, std::vector<Stack>& out, bool* needs_parent) const {
  feed_at(std::move(stack), b, out, needs_parent, 0);
}

void Matcher::feed_at(Stack stack, uint8_t b, std::vector<Stack>& out, bool* needs_parent, int depth) const {
  while (true) {
    if (stack.empty()) {
      if (needs_parent) *needs_parent = true;
      else if (open_end_) out.push_back(std::move(stack));  // past the end: anything goes
      return;
    }
    const Step step = consume(stack.back(), b);
    switch (step.kind) {
      case Step::Refuse: return;
      case Step::Consumed: out.push_back(std::move(stack)); return;
      case Step::Done:
        stack.pop_back();
        out.push_back(std::move(stack));
        return;
      case Step::Pass: stack.pop_back(); continue;
      case Step::Push: push(std::move(stack), step.node, step.state, b, out, needs_parent, depth); return;
    }
  }
}

void Matcher::expand(Stack stack, uint32_t node, std::vector<Stack>& out) const {
  const GrammarNode& n = grammar_->nodes[node];
  if (n.kind == NodeKind::Choice) {
    for (uint32_t alternative : n.children) expand(stack, alternative, out);
    return;
  }
  stack.push_back(Frame{node, 0, 0});
  out.push_back(std::move(stack));
}

MatchState Matcher::start() const {
  MatchState state;
  expand({}, grammar_->root, state.stacks);
  return state;
}

bool Matcher::advance(MatchState& state, uint8_t b) const {
  std::vector<Stack> next;
  for (Stack& stack : state.stacks) feed(std::move(stack), b, next);
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  if (next.size() > kMaxStacks) next.clear();
  state.stacks = std::move(next);
  return !state.stacks.empty();
}

bool Matcher::advance(MatchState& state, std::string_view bytes) const {
  for (char c : bytes)
    if (!advance(state, static_cast<uint8_t>(c))) return false;
  return true;
}

bool Matcher::can_end(const Frame& f) const {
  const GrammarNode& node = grammar_->nodes[f.node];
  switch (node.kind) {
    case NodeKind::Literals: return node.trie.node(f.state).terminal != ByteTrie::kNone && f.state != 0;
    case NodeKind::Number:
    case NodeKind::Integer: {
      const uint32_t p = phase(f.state);
      return p == kZero || p == kInt || p == kFrac || p == kExpDigits;
    }
    case NodeKind::Whitespace: return true;
    case NodeKind::Sequence:
      for (size_t i = f.state; i < node.children.size(); ++i)
        if (!nullable_[node.children[i]]) return false;
      return true;
    default: return false;  // strings, objects and arrays end on their closing byte
  }
}

bool Matcher::accepting(const MatchState& state) const {
  for (const Stack& stack : state.stacks)
    if (std::all_of(stack.begin(), stack.end(), [&](const Frame& f) { return can_end(f); })) return true;
  return false;
}

bool Matcher::finished(const MatchState& state) const {
  return std::all_of(state.stacks.begin(), state.stacks.end(), [](const Stack& s) { return s.empty(); }) &&
         !state.stacks.empty();
}

bool Matcher::shared_behaviour(const Frame& frame) const {
  const NodeKind kind = grammar_->nodes[frame.node].kind;
  return kind == NodeKind::String || kind == NodeKind::Number || kind == NodeKind::Integer ||
         kind == NodeKind::Whitespace;
}

}  // namespace keel::constrain
