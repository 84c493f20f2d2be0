#include "keel/chat/chat_roles.h"

#include <algorithm>
#include <array>

namespace keel::chat {

namespace {
constexpr std::array<std::string_view, kRoleCount> kNames = {"scaffolding", "system",    "tools",       "user",
                                                            "assistant",   "tool_call", "tool_result", "reasoning"};
}

std::string_view role_name(Role role) { return kNames[static_cast<size_t>(role)]; }

std::optional<Role> role_from_name(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<Role>(i);
  return std::nullopt;
}

Role role_of_range(const std::vector<RoleSpan>& spans, size_t begin, size_t end) {
  // Spans are sorted: find the first that ends after `begin`.
  auto it = std::upper_bound(spans.begin(), spans.end(), begin,
                             [](size_t pos, const RoleSpan& s) { return pos < s.end; });
  std::array<size_t, kRoleCount> bytes{};
  std::array<size_t, kRoleCount> first_seen{};
  size_t order = 0;
  for (; it != spans.end() && it->begin < end; ++it) {
    size_t b = std::max(begin, it->begin), e = std::min(end, it->end);
    if (b >= e) continue;
    auto r = static_cast<size_t>(it->role);
    if (bytes[r] == 0) first_seen[r] = order++;
    bytes[r] += e - b;
  }
  Role best = Role::scaffolding;
  for (size_t r = 1; r < kRoleCount; ++r) {
    if (bytes[r] == 0) continue;
    auto cur = static_cast<size_t>(best);
    if (best == Role::scaffolding || bytes[r] > bytes[cur] || (bytes[r] == bytes[cur] && first_seen[r] < first_seen[cur]))
      best = static_cast<Role>(r);
  }
  return best;
}

}  // namespace keel::chat
