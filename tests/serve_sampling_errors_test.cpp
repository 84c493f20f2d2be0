// top_p 0 is inside the documented [0, 1] range of both APIs, and the sampler agrees: it keeps
// the most likely token only, so the answer is the greedy one, never a 500 "generation failed"
// from the engine thread. (Every other sampling boundary: reliability_request_values_test.cpp.)
#include <gtest/gtest.h>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json hello(bool stream, double temperature) {
  return {{"model", "tiny-toolcaller"}, {"max_tokens", 8}, {"stream", stream}, {"temperature", temperature},
          {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

// The answer's text, whole or rebuilt from its stream (tool calls as name and arguments: their ids
// differ from answer to answer).
std::string answer_text(const std::string& path, const JsonResponse& r, bool stream) {
  if (path == "/v1/messages") {
    const json content = stream ? replay_anthropic_stream(parse_sse(r.text))["content"] : r.body["content"];
    std::string out;
    for (const auto& block : content)
      out += block["type"] == "tool_use" ? block["name"].get<std::string>() + block["input"].dump()
                                         : block.value("text", std::string()) + "|";
    return out;
  }
  const json message = stream ? replay_openai_stream(parse_sse(r.text)) : r.body["choices"][0]["message"];
  std::string out = message["content"].is_string() ? message["content"].get<std::string>() : "";
  for (const auto& c : message.value("tool_calls", json::array())) {
    const json& call = c.contains("function") ? c["function"] : c;  // whole: nested; replayed: flat
    out += "|" + call["name"].get<std::string>() + call["arguments"].get<std::string>();
  }
  return out;
}

TEST(ServeSamplingErrors, TopPZeroIsGreedyInBothProtocols) {
  ServerProcess server;
  auto client = server.client();
  for (const std::string path : {"/v1/messages", "/v1/chat/completions"}) {
    for (bool stream : {false, true}) {
      const auto greedy = post_json(client, path, hello(stream, 0.0));
      ASSERT_EQ(greedy.status, 200) << greedy.text;
      const std::string expected = answer_text(path, greedy, stream);
      // A high temperature and different seeds: only the top_p cut can make these agree.
      for (int seed : {1, 2, 3}) {
        json request = hello(stream, 1.5 - (path == "/v1/messages" ? 0.5 : 0.0));
        request["top_p"] = 0;
        request["seed"] = seed;
        const auto r = post_json(client, path, request);
        ASSERT_EQ(r.status, 200) << path << " " << r.text;
        EXPECT_EQ(answer_text(path, r, stream), expected) << path << (stream ? " stream" : "") << " seed " << seed;
      }
    }
  }
  EXPECT_EQ(server.log().find("-> 500"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace keel::test
