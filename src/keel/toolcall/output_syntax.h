#pragma once
// The special tokens a format's output is written with. A model's special tokens are control
// tokens: none of them may reach a client as text. The ones listed here are syntax the output
// parser consumes (Harmony's <|channel|>, Gemma 4's <|tool_call>, ...); any other special token a
// model samples ends its turn (engine/chat_turn.cpp). Pure functions, any thread.
#include <string>
#include <string_view>

#include "keel/toolcall/format_detect.h"

namespace keel::toolcall {

// True when `token` (a special token's text) is markup the parser of `format` consumes.
bool is_output_syntax(ToolCallFormat format, std::string_view token);

// True when `token` (a special token's text) ends the assistant's turn in `format`'s output even
// though the model's end-of-sequence ids may not list it: Harmony's <|call|> (the call waits for
// its result) and <|return|>. The engine stops there as at end of sequence; a call the token
// closes is complete without it.
bool ends_turn(ToolCallFormat format, std::string_view token);

// The text that closes a reasoning block in `format`'s output ("\n</think>\n\n" for the <think>
// formats), written when a reasoning budget runs out. Empty when keel cannot close it (Harmony's
// analysis channel).
std::string_view reasoning_closer(ToolCallFormat format);

// The text keel writes for the model where its answer begins when the request requires a call
// (tool_choice any / required, or a named tool): the opening of a call in `format`, and with a
// `tool_name`, the call's name too, up to where its arguments begin. Where the format allows, it
// ends where the model's own tokens would start a new piece (a newline, or before the space that
// opens the arguments), so what the model writes next is tokenized as in training. Empty when
// keel does not write calls in `format` (Mistral's and DeepSeek's markup differs between releases
// under one format name): such a request is checked after the fact. `after_output`: the model has
// written something (its reasoning) before; Harmony then starts a new message.
std::string call_opener(ToolCallFormat format, std::string_view tool_name, bool after_output = false);

}  // namespace keel::toolcall
