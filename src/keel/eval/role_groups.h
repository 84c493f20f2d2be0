#pragma once
// The role groups eval reports divergence by. The renderer labels tokens with eight roles
// (keel/chat/chat_roles.h); eval folds them into the spans a reader of a tool-calling session cares
// about: the request's preamble (system prompt and tool schemas), user text, assistant text, tool
// calls, tool results, and the template's own markers.
//
// Threads: constants and pure functions: any thread.
#include <array>
#include <cstddef>
#include <string_view>

#include "keel/chat/chat_roles.h"

namespace keel::eval {

enum class RoleGroup { tools_system = 0, user, assistant_text, tool_call, tool_result, markers };
constexpr size_t kRoleGroupCount = 6;
constexpr std::array<RoleGroup, kRoleGroupCount> kAllRoleGroups = {
    RoleGroup::tools_system, RoleGroup::user,        RoleGroup::assistant_text,
    RoleGroup::tool_call,    RoleGroup::tool_result, RoleGroup::markers};

RoleGroup role_group(chat::Role role);
std::string_view role_group_name(RoleGroup group);

}  // namespace keel::eval
