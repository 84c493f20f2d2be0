#pragma once
// Carries the renderer's per-byte roles over to tokens: every token of an encoded prompt gets the
// role of the bytes it decodes to. This is what the KV-cache policy and the eval harness consume.
#include <cstdint>
#include <span>
#include <vector>

#include "keel/chat/chat_roles.h"
#include "keel/text/tokenizer.h"

namespace keel::chat {

// `ids` must encode the text the spans describe (tokenizer.encode(prompt.text)). Each token's bytes
// are located by decoding the ids one after another (decode(encode(x)) == x for the supported
// tokenizers); its role is role_of_range over those bytes. Throws keel::Error if the decoded ids do
// not spell out the spanned text.
std::vector<Role> token_roles(const text::Tokenizer& tokenizer, std::span<const int32_t> ids,
                              const std::vector<RoleSpan>& spans);

}  // namespace keel::chat
