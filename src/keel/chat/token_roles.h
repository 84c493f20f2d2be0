#pragma once
// Carries the renderer's per-byte roles over to tokens: every token of an encoded prompt gets the
// role of the bytes it decodes to. This is what the KV-cache policy and the eval harness consume.
// Pure functions of their arguments (text::Tokenizer is safe from many threads): any thread.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "keel/chat/chat_roles.h"
#include "keel/text/tokenizer.h"

namespace keel::chat {

// The byte ranges of a rendered prompt that its template wrote itself (the scaffolding spans):
// the only places where a special token may become a control token.
std::vector<text::ByteRange> template_markup_ranges(const std::vector<RoleSpan>& spans);

// Token ids of a rendered prompt: the template's own markup is encoded with special-token matching
// on, everything a client wrote (every other role) with it off, in one pass so that BPE merges
// across span edges are unchanged. When the client-written text holds no special token, the ids
// are exactly tokenizer.encode(text). Non-special added tokens (Qwen's <tool_call>) match
// everywhere, as in Hugging Face.
std::vector<int32_t> encode_rendered_prompt(const text::Tokenizer& tokenizer, std::string_view text,
                                            const std::vector<RoleSpan>& spans);

// The role of each token of `ids`, which encode `text` (the rendered prompt the spans describe).
// Each token's bytes are found by decoding the ids one after another and aligning that with
// `text`: normalization may change the bytes (a decomposed "e\u0301" decodes as the composed
// "\u00e9"), and such a character maps to its original spelling as a whole. Never throws for text
// the tokenizer encodes; a token that straddles spans takes role_of_range over its bytes.
std::vector<Role> token_roles(const text::Tokenizer& tokenizer, std::span<const int32_t> ids, std::string_view text,
                              const std::vector<RoleSpan>& spans);

}  // namespace keel::chat
