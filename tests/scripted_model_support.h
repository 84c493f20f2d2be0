#pragma once
// A model that answers agent clients with a fixed script, for tests of the clients' protocol: a
// `keel synth` Qwen2 model (hidden 64, one layer) with the real Qwen2.5 tokenizer and chat
// template, whose weights are set by hand so that, greedy or sampled at temperature 1,
//   - a prompt with no tool result in it is answered with `first` (a tool call, as the template's
//     <tool_call>{...}</tool_call>, or text), then <|im_end|>;
//   - a prompt that holds a tool result (<tool_response>: its "_response" token; no client may
//     write that token elsewhere) is answered with `after_tool`.
//
// How: every token's embedding is u0 except the script's. The residual stream at the last
// position is the token's own embedding (the random layer adds little), so after RMSNorm the
// logits are that embedding's direction dotted with every embedding. Each script token t_i owns a
// direction q_i and has embedding m_i (q_i + q_prev), with m growing 3x a token: after t_i the next
// token scores m_{i+1}/sqrt2 > m_i sqrt2, its own score, and nothing else scores. The first
// token's "previous" direction is that of "\n" (the end of "<|im_start|>assistant\n"), or for the
// after-tool script, a direction the attention layer writes: at a "\n" query, head 0 attends
// (position-independently, on rope's slowest pair) to "_response" keys and its value puts a
// large component on that direction, which outweighs "\n"'s own. Since a token can have only one
// successor, the scripts are spelled with vocabulary tokens used once each (not necessarily the
// tokenizer's own encoding; a model may write any tokens that spell its text).
// Throws std::runtime_error when a script cannot be laid out that way.
#include <filesystem>
#include <string>

#include "test_support.h"

namespace keel::test {

inline constexpr int kScriptedModelContext = 32768;

// Writes the model folder into `tmp` and returns it.
std::filesystem::path write_scripted_model(const TempDir& tmp, const std::string& first, const std::string& after_tool);

}  // namespace keel::test
