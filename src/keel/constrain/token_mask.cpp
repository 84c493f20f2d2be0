#include "keel/constrain/token_mask.h"

#include <algorithm>
#include <atomic>
#include <bit>

#include "keel/constrain/json_schema.h"
#include "keel/util/error.h"

namespace keel::constrain {
namespace {

constexpr uint32_t kSharedOwner = 0x80000000u;
// Past this many tokens to check against the whole stack, one trie walk is cheaper.
constexpr size_t kMostTokensCheckedOneByOne = 2048;

FrameKey key_of(const Matcher& matcher, const Frame& frame) {
  const GrammarNode& node = matcher.grammar().nodes[frame.node];
  if (matcher.shared_behaviour(frame)) return {kSharedOwner | static_cast<uint32_t>(node.kind), frame.state, 0};
  uint64_t extra = frame.extra;
  if (node.kind == NodeKind::Array) {
    // Only comparisons with minItems and maxItems depend on the count: past both it stops mattering.
    const uint64_t bound = std::max<uint64_t>(node.min_items, node.max_items == UINT32_MAX ? 0 : node.max_items);
    extra = std::min(extra, bound);
  }
  return {frame.node, frame.state, extra};
}

}  // namespace

struct GrammarMaskCache {
  std::mutex mutex;
  uint64_t vocabulary = 0;  // the masks are of this vocabulary's tokens (Vocabulary::id)
  std::unordered_map<FrameKey, std::unique_ptr<FrameMask>, FrameKeyHash> frames;
};

TokenSet& TokenSet::operator|=(const TokenSet& other) {
  for (size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
  return *this;
}

size_t TokenSet::count() const {
  size_t n = 0;
  for (uint64_t w : words_) n += static_cast<size_t>(std::popcount(w));
  return n;
}

Vocabulary::Vocabulary(const text::Tokenizer& tokenizer, size_t rows, std::span<const std::string_view> value_markup)
    : bytes_(rows) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id++;
  const size_t known = std::min(rows, tokenizer.vocab_size());
  for (size_t id = 0; id < known; ++id) {
    const auto token = static_cast<int32_t>(id);
    // Markup (<tool_call>, <|im_end|>) is never value text, but for what a value's syntax uses.
    if (tokenizer.is_added(token) &&
        std::find(value_markup.begin(), value_markup.end(), tokenizer.token_text(token)) == value_markup.end())
      continue;
    std::string text;
    try {
      text = tokenizer.token_bytes(token);  // mid-output, as a token after others
    } catch (const Error&) {
      continue;  // a hole in the vocabulary
    }
    if (text.empty()) continue;
    bytes_[id] = std::move(text);
    sorted_.push_back(token);
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  build(0, sorted_.size(), 0);
}

uint32_t Vocabulary::build(size_t begin, size_t end, size_t depth) {
  const auto index = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({0, 0, static_cast<uint32_t>(begin), static_cast<uint32_t>(end), 0});
  max_depth_ = std::max(max_depth_, depth);
  size_t i = begin;
  while (i < end && bytes_[static_cast<size_t>(sorted_[i])].size() == depth) ++i;
  nodes_[index].ending = static_cast<uint32_t>(i - begin);
  const std::vector<ByteRun> groups = runs_by_next_byte(
      i, end, depth, [&](size_t k) { return std::string_view(bytes_[static_cast<size_t>(sorted_[k])]); });
  const auto first = static_cast<uint32_t>(edges_.size());
  nodes_[index].first_edge = first;
  nodes_[index].edge_count = static_cast<uint32_t>(groups.size());
  edges_.resize(edges_.size() + groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint32_t child = build(groups[g].begin, groups[g].end, depth + 1);
    edges_[first + g] = {groups[g].byte, child};
  }
  return index;
}

void Vocabulary::walk(const Matcher& matcher, uint32_t node, const std::vector<Stack>& stacks, FrameMask& mask,
                      size_t depth, std::vector<std::vector<Stack>>& levels, bool top_only) const {
  const Node n = nodes_[node];
  for (uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
    const auto [byte, child] = edges_[e];
    const Node& c = nodes_[child];
    std::vector<Stack>& next = levels[depth];
    next.clear();
    bool needs_parent = false;
    for (const Stack& stack : stacks) {
      if (top_only && stack.empty()) needs_parent = true;  // the frame has closed: what follows is its parent's
      else matcher.feed(stack, byte, next, top_only ? &needs_parent : nullptr);
      if (needs_parent) break;
    }
    if (needs_parent) {
      // When the frame alone has closed (one stack, now empty), the rest of every token below
      // is the parent's from this byte on.
      const bool closed = stacks.size() == 1 && (stacks[0].empty() || next.empty());
      const uint16_t handoff = closed && depth < FrameMask::kHandoffUnknown ? static_cast<uint16_t>(depth)
                                                                           : FrameMask::kHandoffUnknown;
      for (uint32_t i = c.begin; i < c.end; ++i) {
        mask.uncertain.push_back(sorted_[i]);
        mask.handoff.push_back(handoff);
      }
      continue;
    }
    if (next.empty()) continue;
    if (next.size() > 1) {
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
    }
    for (uint32_t i = c.begin; i < c.begin + c.ending; ++i) mask.taken.set(sorted_[i]);
    if (c.edge_count > 0) walk(matcher, child, next, mask, depth + 1, levels, top_only);
  }
}

FrameMask Vocabulary::compute_frame_mask(const Matcher& matcher, const Frame& frame) const {
  FrameMask mask{TokenSet(rows()), {}, {}};
  std::vector<std::vector<Stack>> levels(max_depth_ + 1);  // one per byte of the longest token
  walk(matcher, 0, {Stack{frame}}, mask, 0, levels, true);
  return mask;
}

TokenSet Vocabulary::compute_stack_mask(const Matcher& matcher, const Stack& stack) const {
  FrameMask mask{TokenSet(rows()), {}, {}};
  std::vector<std::vector<Stack>> levels(max_depth_ + 1);
  walk(matcher, 0, {stack}, mask, 0, levels, false);
  return std::move(mask.taken);
}

const FrameMask& Vocabulary::frame_mask(const Matcher& matcher, const Frame& frame) const {
  const FrameKey key = key_of(matcher, frame);
  std::lock_guard lock(mutex_);
  auto& slot = shared_[key];
  if (!slot) slot = std::make_unique<FrameMask>(compute_frame_mask(matcher, frame));
  return *slot;
}

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar, const Vocabulary& vocabulary, bool open_end)
    : grammar_(std::move(grammar)), vocabulary_(&vocabulary), matcher_(*grammar_, open_end), state_(matcher_.start()) {}

const FrameMask& TokenConstraint::mask_of(const Frame& frame) {
  if (matcher_.shared_behaviour(frame)) return vocabulary_->frame_mask(matcher_, frame);
  static std::mutex creating;
  {
    std::lock_guard lock(creating);
    if (!grammar_->masks) grammar_->masks = std::make_shared<GrammarMaskCache>();
  }
  GrammarMaskCache& cache = *grammar_->masks;
  std::lock_guard lock(cache.mutex);
  if (cache.vocabulary != vocabulary_->id()) {  // first use, or another model's tokens
    cache.frames.clear();
    cache.vocabulary = vocabulary_->id();
  }
  auto& slot = cache.frames[key_of(matcher_, frame)];
  if (!slot) slot = std::make_unique<FrameMask>(vocabulary_->compute_frame_mask(matcher_, frame));
  return *slot;  // never erased while the grammar lives (unless another vocabulary uses it)
}

bool TokenConstraint::takes(const Stack& stack, std::string_view bytes) const {
  MatchState state{{stack}};
  return matcher_.advance(state, bytes);
}

void TokenConstraint::allowed(TokenSet& out) {
  out.clear();
  for (const Stack& stack : state_.stacks) {
    if (stack.empty()) continue;  // complete: no more bytes on this path
    const FrameMask& mask = mask_of(stack.back());
    out |= mask.taken;
    if (mask.uncertain.size() > kMostTokensCheckedOneByOne) {
      // A frame that ends where anything else begins (whitespace, a number) leaves nearly every
      // token to the frames below: walking the trie with the whole stack prunes them by prefix.
      out |= vocabulary_->compute_stack_mask(matcher_, stack);
      continue;
    }
    add_uncertain(stack, mask, out);
  }
}

// The uncertain tokens `stack` takes. Where the top frame closes inside a token, only the rest of
// it is checked, against the stack below the frame; many tokens share that rest ("\",", "\"}"),
// so each distinct rest is checked once.
void TokenConstraint::add_uncertain(const Stack& stack, const FrameMask& mask, TokenSet& out) {
  const Stack below(stack.begin(), stack.end() - 1);
  std::unordered_map<std::string_view, bool> rest_taken;
  for (size_t i = 0; i < mask.uncertain.size(); ++i) {
    const int32_t id = mask.uncertain[i];
    if (out.test(id)) continue;
    const std::string_view bytes = vocabulary_->bytes(id);
    bool taken;
    if (mask.handoff[i] == FrameMask::kHandoffUnknown) {
      taken = takes(stack, bytes);
    } else {
      const std::string_view rest = bytes.substr(mask.handoff[i]);
      const auto [it, fresh] = rest_taken.try_emplace(rest, false);
      if (fresh) it->second = takes(below, rest);
      taken = it->second;
    }
    if (taken) out.set(id);
  }
}

bool TokenConstraint::accept(int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= vocabulary_->rows()) return accept_bytes({});
  const std::string_view bytes = vocabulary_->bytes(id);
  if (bytes.empty()) {
    state_.stacks.clear();  // a token the grammar never offers
    return false;
  }
  return accept_bytes(bytes);
}

bool TokenConstraint::accept_bytes(std::string_view bytes) {
  if (bytes.empty()) {
    state_.stacks.clear();
    return false;
  }
  return matcher_.advance(state_, bytes);
}

void Vocabulary::warm() const {
  // A document that walks strings (ASCII, two- to four-byte UTF-8, escapes), numbers of every
  // shape and the whitespace between tokens: each byte's frames get their masks computed.
  static const std::string_view kDocument =
      "{\"text\": \"ab c\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80 \\\"q\\\" \\\\ \\n \\u00e9\",\n  \"numbers\": [0, -12, "
      "3.25, 1e5, -0.5E-3, 12345678901234567],\n  \"words\": [true, false, null], \"empty\": {}}";
  auto grammar = std::make_shared<Grammar>();
  grammar->root = add_any_json(*grammar);
  TokenConstraint walk(grammar, *this);
  TokenSet allowed(rows());
  for (char c : kDocument) {
    walk.allowed(allowed);
    if (!walk.accept_bytes(std::string_view(&c, 1))) throw InternalError("constrain: the warm-up document left the grammar");
  }
}

}  // namespace keel::constrain
