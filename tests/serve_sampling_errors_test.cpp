// Sampling values the request parsers accept but the sampler refuses (top_p 0 is inside the
// documented [0, 1] range of both APIs) are the client's error: a 400 naming the field, answered
// before the request is queued, never a 500 "generation failed" from the engine thread.
#include <gtest/gtest.h>

#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;

json with_top_p_zero(bool stream) {
  return {{"model", "tiny-toolcaller"}, {"max_tokens", 3}, {"stream", stream}, {"temperature", 0.5}, {"top_p", 0},
          {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

TEST(ServeSamplingErrors, TopPZeroIsABadRequestInBothProtocols) {
  ServerProcess server;
  auto client = server.client();
  for (bool stream : {false, true}) {
    const auto a = post_json(client, "/v1/messages", with_top_p_zero(stream));
    EXPECT_EQ(a.status, 400) << a.text;
    ASSERT_TRUE(a.body.is_object()) << a.text;  // an envelope, not a stream that failed later
    EXPECT_EQ(a.body["error"]["type"], "invalid_request_error") << a.text;
    EXPECT_NE(a.body["error"]["message"].get<std::string>().find("top_p"), std::string::npos) << a.text;

    const auto o = post_json(client, "/v1/chat/completions", with_top_p_zero(stream));
    EXPECT_EQ(o.status, 400) << o.text;
    ASSERT_TRUE(o.body.is_object()) << o.text;
    EXPECT_EQ(o.body["error"]["type"], "invalid_request_error") << o.text;
  }
  EXPECT_EQ(server.log().find("-> 500"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace keel::test
