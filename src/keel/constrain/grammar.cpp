#include "keel/constrain/grammar.h"

#include "keel/util/error.h"

#include <algorithm>

#include "keel/constrain/matcher.h"

namespace keel::constrain {

ByteTrie::ByteTrie(const std::vector<std::string>& strings) {
  std::vector<std::pair<std::string, uint32_t>> sorted;
  for (size_t i = 0; i < strings.size(); ++i) sorted.emplace_back(strings[i], static_cast<uint32_t>(i));
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  sorted.erase(std::unique(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
               sorted.end());
  strings_ = sorted.size();
  build(sorted, 0, sorted.size(), 0);
}

// The node for the strings in [begin, end), which share their first `depth` bytes.
uint32_t ByteTrie::build(const std::vector<std::pair<std::string, uint32_t>>& sorted, size_t begin, size_t end,
                         size_t depth) {
  const auto index = static_cast<uint32_t>(nodes_.size());
  nodes_.emplace_back();
  for (size_t i = begin; i < end; ++i)
    if (sorted[i].first.size() == depth) nodes_[index].terminal = sorted[i].second;
  const std::vector<ByteRun> groups =
      runs_by_next_byte(begin, end, depth, [&](size_t i) { return std::string_view(sorted[i].first); });
  const auto first = static_cast<uint32_t>(edges_.size());
  nodes_[index].first_edge = first;
  nodes_[index].edge_count = static_cast<uint32_t>(groups.size());
  edges_.resize(edges_.size() + groups.size());
  uint64_t below = 0;
  if (nodes_[index].terminal != kNone && nodes_[index].terminal < 64) below |= uint64_t{1} << nodes_[index].terminal;
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint32_t child = build(sorted, groups[g].begin, groups[g].end, depth + 1);
    edges_[first + g] = {groups[g].byte, child};
    below |= nodes_[child].below;
  }
  nodes_[index].below = below;
  return index;
}

uint32_t ByteTrie::child(uint32_t node, uint8_t byte) const {
  const Node& n = nodes_[node];
  const auto begin = edges_.begin() + n.first_edge;
  const auto end = begin + n.edge_count;
  const auto it = std::lower_bound(begin, end, byte, [](const auto& e, uint8_t b) { return e.first < b; });
  return it != end && it->first == byte ? it->second : kNone;
}

void ByteTrie::mark_string_states() {
  // Nodes are numbered in depth-first order, so a parent's state is set before its children's.
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    for (uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
      const uint8_t next = string_body_step(n.string_state, edges_[e].first);
      nodes_[edges_[e].second].string_state = next >= kStringClosed ? 0 : next;
    }
  }
}

uint32_t Grammar::add_literal(std::string_view text) {
  GrammarNode node;
  node.kind = NodeKind::Literals;
  node.trie = ByteTrie({std::string(text)});
  return add(std::move(node));
}

uint32_t Grammar::add_sequence(std::vector<uint32_t> parts) {
  GrammarNode node;
  node.kind = NodeKind::Sequence;
  node.children = std::move(parts);
  return add(std::move(node));
}

uint32_t Grammar::add_whitespace() {
  GrammarNode node;
  node.kind = NodeKind::Whitespace;
  return add(std::move(node));
}

uint32_t Grammar::add_text(std::string terminator, std::string excluded) {
  if (terminator.empty() || terminator.size() > 15) throw InternalError("constrain: a text terminator of 1 to 15 bytes");
  GrammarNode node;
  node.kind = NodeKind::Text;
  node.terminator = std::move(terminator);
  node.excluded = std::move(excluded);
  return add(std::move(node));
}

}  // namespace keel::constrain
