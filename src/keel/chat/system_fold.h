#pragma once
// System messages after the start of a conversation: Anthropic's mid-conversation system messages
// (Claude Code puts its agent and skill listings at messages[1]) and OpenAI system / developer
// messages anywhere but first.
//
// They are rendered through the model's own template where it accepts them (ChatML templates such
// as Qwen2.5 and Qwen3 render a system turn at any position). Many templates raise for them
// ("System message must be at the beginning", "Conversation roles must alternate") or silently
// drop them; for those the system text is folded into a neighbouring user message, as a block
//
//   <system>
//   TEXT
//   </system>
//
// separated from the user's own text by a blank line. Which user message:
//   1. the first message after the system message(s) that is not a tool message, if it is a user
//      message: the block goes before its text;
//   2. else the message right before, if it is a user message: the block goes after its text;
//   3. else (the neighbours are assistant or tool messages, or there are none) a user message of
//      its own, placed after any tool messages that follow.
// Consecutive system messages fold together, in order. The folded text keeps the `system` role:
// every byte of the block (delimiters and separator included) is tagged system, the user's text
// stays user. The rules only look at a system message's neighbours, so a fold target does not move
// when later turns are appended (the prefix cache keeps working across turns).
// docs/chat-templates.md describes this for users.
// Pure functions of their arguments (render_conversation only calls the const
// ChatTemplate::render): any thread.
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/chat/chat_renderer.h"

namespace keel::chat {

inline constexpr std::string_view kFoldedSystemOpen = "<system>\n";
inline constexpr std::string_view kFoldedSystemClose = "\n</system>";
inline constexpr std::string_view kFoldedSystemSeparator = "\n\n";

// A conversation with its later system messages folded into user messages, and where the
// folded text sits (ContentRun with Role::system) for ChatTemplate::render.
struct FoldedConversation {
  nlohmann::ordered_json messages;
  std::vector<ContentRun> runs;
};

// Whether a system or developer message follows the first message.
bool has_later_system_message(const nlohmann::ordered_json& messages);

// Folds every system / developer message after the first message as described above (messages:
// OpenAI-format array). A system message without text is dropped. The first message is left as it
// is, whatever its role.
FoldedConversation fold_later_system_messages(const nlohmann::ordered_json& messages);

// What a renderer of a conversation did with later system messages.
enum class SystemPlacement {
  none,       // the conversation has none
  in_place,   // the template rendered them where they are
  folded,     // the template raised or dropped their text: folded into user messages
};

struct ConversationPrompt {
  RenderedPrompt prompt;
  SystemPlacement system = SystemPlacement::none;
};

// ChatTemplate::render for a whole conversation: later system messages render in place when the
// template accepts them there (renders without raising and every one's text, trimmed, appears in
// the output as system text, in order); otherwise the folded conversation is rendered, and an
// error it raises is the one thrown. Every caller that turns messages into a prompt (serve,
// count_tokens, eval) goes through this via ServedModel::prepare.
ConversationPrompt render_conversation(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                       const nlohmann::ordered_json& tools, const nlohmann::ordered_json& kwargs,
                                       const ChatRenderOptions& options = {});

}  // namespace keel::chat
