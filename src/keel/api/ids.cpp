// Response and tool-call ids. Clients only need them unique (Claude Code matches tool_result to
// tool_use by id across a whole session), so they are random rather than sequential: a restarted
// server never reuses an id a client still holds.
#include <random>
#include <string>

#include "keel/api/chat_result.h"

namespace keel::api {

namespace {

std::string random_suffix(size_t length) {
  static constexpr char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  std::string out(length, '0');
  for (auto& c : out) c = kAlphabet[pick(rng)];
  return out;
}

}  // namespace

std::string new_message_id(Protocol protocol) {
  switch (protocol) {
    case Protocol::Anthropic: return "msg_" + random_suffix(24);
    case Protocol::OpenAI: return "chatcmpl-" + random_suffix(24);
    case Protocol::Responses: return "resp_" + random_suffix(24);
  }
  return random_suffix(24);
}

std::string new_tool_call_id(Protocol protocol) {
  return (protocol == Protocol::Anthropic ? "toolu_" : "call_") + random_suffix(24);
}

std::string new_item_id(std::string_view prefix) { return std::string(prefix) + random_suffix(24); }

}  // namespace keel::api
