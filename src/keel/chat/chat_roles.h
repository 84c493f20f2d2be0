#pragma once
// The role of every character of a rendered prompt. The KV-cache precision policy and the eval
// harness work per role, so the renderer labels each byte with exactly one of these.
// Constants and pure functions: any thread.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace keel::chat {

enum class Role : uint8_t {
  scaffolding = 0,  // text the template itself writes: turn markers, headers, default prompts
  system,           // system / developer message content
  tools,            // the tool schemas the request offers
  user,             // user message content
  assistant,        // assistant message text
  tool_call,        // calls the assistant made earlier: names, ids, arguments
  tool_result,      // tool message content
  reasoning,        // reasoning_content / thinking of earlier assistant turns
};
constexpr size_t kRoleCount = 8;

std::string_view role_name(Role role);
std::optional<Role> role_from_name(std::string_view name);

// Byte range [begin, end) of the prompt text and its role. A rendered prompt's spans are sorted,
// contiguous, cover the whole text, and adjacent spans have different roles.
struct RoleSpan {
  size_t begin;
  size_t end;
  Role role;
  bool operator==(const RoleSpan&) const = default;
};

// The role for a token covering bytes [begin, end): the non-scaffolding role with the most bytes in
// the range (earliest wins a tie); scaffolding only when the range is all scaffolding. A token that
// merges a newline of scaffolding with message text therefore belongs to the message.
Role role_of_range(const std::vector<RoleSpan>& spans, size_t begin, size_t end);

}  // namespace keel::chat
