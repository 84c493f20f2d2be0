#include "keel/eval/role_groups.h"

namespace keel::eval {

RoleGroup role_group(chat::Role role) {
  switch (role) {
    case chat::Role::system:
    case chat::Role::tools:
      return RoleGroup::tools_system;
    case chat::Role::user:
      return RoleGroup::user;
    case chat::Role::assistant:
    case chat::Role::reasoning:
      return RoleGroup::assistant_text;
    case chat::Role::tool_call:
      return RoleGroup::tool_call;
    case chat::Role::tool_result:
      return RoleGroup::tool_result;
    case chat::Role::scaffolding:
      break;
  }
  return RoleGroup::markers;
}

std::string_view role_group_name(RoleGroup group) {
  switch (group) {
    case RoleGroup::tools_system: return "tools/system";
    case RoleGroup::user: return "user";
    case RoleGroup::assistant_text: return "assistant text";
    case RoleGroup::tool_call: return "tool_call";
    case RoleGroup::tool_result: return "tool_result";
    case RoleGroup::markers: return "template markers";
  }
  return "?";
}

}  // namespace keel::eval
