#include "keel/chat/system_fold.h"

#include <algorithm>
#include <map>
#include <string>

#include "keel/util/error.h"

namespace keel::chat {
namespace {

using json = nlohmann::ordered_json;

std::string role_of(const json& message) {
  if (!message.is_object()) return "";
  auto it = message.find("role");
  return it != message.end() && it->is_string() ? it->get<std::string>() : "";
}

bool is_later_system(const json& messages, size_t i) {
  if (i == 0) return false;
  const std::string role = role_of(messages[i]);
  return role == "system" || role == "developer";
}

// A message's text: its content string, or the text parts of a list of parts joined by newlines.
std::string content_text(const json& message) {
  if (!message.is_object()) return "";
  auto it = message.find("content");
  if (it == message.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  std::string text;
  if (it->is_array()) {
    bool first = true;
    for (const auto& part : *it) {
      if (!part.is_object()) continue;
      auto t = part.find("text");
      if (t == part.end() || !t->is_string()) continue;
      if (!first) text += '\n';
      text += t->get_ref<const std::string&>();
      first = false;
    }
  }
  return text;
}

// A user message whose content is a string (or absent): the text can be extended in place.
bool is_foldable_user(const json& message) {
  if (role_of(message) != "user") return false;
  auto it = message.find("content");
  return it == message.end() || it->is_string() || it->is_null();
}

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string join_blocks(const std::vector<std::string>& blocks) {
  std::string out;
  for (const auto& b : blocks) {
    if (!out.empty()) out += kFoldedSystemSeparator;
    out += b;
  }
  return out;
}

// Are bytes [begin, end) all system text?
bool all_system(const std::vector<RoleSpan>& spans, size_t begin, size_t end) {
  auto it = std::upper_bound(spans.begin(), spans.end(), begin, [](size_t b, const RoleSpan& s) { return b < s.end; });
  for (; it != spans.end() && it->begin < end; ++it)
    if (it->role != Role::system) return false;
  return true;
}

// Did the template show every later system message's text, as system text, in order?
bool later_system_text_survives(const RenderedPrompt& prompt, const json& messages) {
  size_t cursor = 0;
  for (size_t i = 1; i < messages.size(); ++i) {
    if (!is_later_system(messages, i)) continue;
    const std::string text = content_text(messages[i]);
    const std::string_view wanted = trim(text);
    if (wanted.empty()) continue;
    bool found = false;
    for (size_t at = prompt.text.find(wanted, cursor); at != std::string::npos; at = prompt.text.find(wanted, at + 1)) {
      if (all_system(prompt.spans, at, at + wanted.size())) {
        cursor = at + wanted.size();
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

bool has_later_system_message(const json& messages) {
  if (!messages.is_array()) return false;
  for (size_t i = 1; i < messages.size(); ++i)
    if (is_later_system(messages, i)) return true;
  return false;
}

FoldedConversation fold_later_system_messages(const json& messages) {
  if (!messages.is_array()) throw keel::Error("messages must be a JSON array");
  const size_t n = messages.size();
  std::vector<std::vector<std::string>> before(n), after(n);  // blocks going before / after a user's text
  std::map<size_t, std::vector<std::string>> inserted;        // a new user message before message k (k == n: at the end)

  for (size_t i = 1; i < n;) {
    if (!is_later_system(messages, i)) {
      ++i;
      continue;
    }
    const size_t first = i;
    std::vector<std::string> blocks;
    for (; i < n && is_later_system(messages, i); ++i) {
      std::string text = content_text(messages[i]);
      if (!text.empty()) blocks.push_back(std::string(kFoldedSystemOpen) + text + std::string(kFoldedSystemClose));
    }
    if (blocks.empty()) continue;
    size_t anchor = i;
    while (anchor < n && (role_of(messages[anchor]) == "tool" || is_later_system(messages, anchor))) ++anchor;
    std::vector<std::string>* target = nullptr;
    if (anchor < n && is_foldable_user(messages[anchor])) target = &before[anchor];
    else if (is_foldable_user(messages[first - 1])) target = &after[first - 1];
    else target = &inserted[anchor];
    target->insert(target->end(), std::make_move_iterator(blocks.begin()), std::make_move_iterator(blocks.end()));
  }

  FoldedConversation out;
  out.messages = json::array();
  auto emit_inserted = [&](size_t at) {
    auto it = inserted.find(at);
    if (it == inserted.end()) return;
    std::string content = join_blocks(it->second);
    out.runs.push_back({out.messages.size(), 0, content.size(), Role::system});
    out.messages.push_back({{"role", "user"}, {"content", std::move(content)}});
  };
  for (size_t k = 0; k < n; ++k) {
    emit_inserted(k);
    if (is_later_system(messages, k)) continue;
    if (before[k].empty() && after[k].empty()) {
      out.messages.push_back(messages[k]);
      continue;
    }
    json message = messages[k];
    const std::string user = content_text(message);
    const size_t index = out.messages.size();
    std::string content;
    if (!before[k].empty()) {
      content = join_blocks(before[k]);
      if (!user.empty() || !after[k].empty()) content += kFoldedSystemSeparator;
      out.runs.push_back({index, 0, content.size(), Role::system});
    }
    content += user;
    if (!after[k].empty()) {
      const size_t from = content.size();
      if (!user.empty()) content += kFoldedSystemSeparator;  // else the leading blocks' separator parts them
      content += join_blocks(after[k]);
      out.runs.push_back({index, from, content.size(), Role::system});
    }
    message["content"] = std::move(content);
    out.messages.push_back(std::move(message));
  }
  emit_inserted(n);
  return out;
}

ConversationPrompt render_conversation(const ChatTemplate& tmpl, const json& messages, const json& tools,
                                       const json& kwargs, const ChatRenderOptions& options) {
  ConversationPrompt out;
  if (!has_later_system_message(messages)) {
    out.prompt = tmpl.render(messages, tools, kwargs, options);
    return out;
  }
  try {
    out.prompt = tmpl.render(messages, tools, kwargs, options);
    if (later_system_text_survives(out.prompt, messages)) {
      out.system = SystemPlacement::in_place;
      return out;
    }
  } catch (const keel::Error&) {
    // The template refuses a system message there (or something else is wrong, which the folded
    // rendering below reports in its own words).
  }
  FoldedConversation folded = fold_later_system_messages(messages);
  out.prompt = tmpl.render(folded.messages, tools, kwargs, options, folded.runs);
  out.system = SystemPlacement::folded;
  return out;
}

}  // namespace keel::chat
