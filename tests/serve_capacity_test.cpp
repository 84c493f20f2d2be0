// The KV pool holds at least one whole context: `keel serve` refuses a --kv-memory below what one
// context needs under the served policy, at start and with the fix in the message. (With one
// sequence running at a time, a smaller pool would fail a long conversation on every retry; once
// turns run side by side, a full pool answers 529/503 overloaded, see api_error_mapping_test.)
#include <gtest/gtest.h>

#include "server_support.h"

namespace keel::test {
namespace {

TEST(ServeCapacity, KvMemoryBelowOneContextIsRefusedAtStart) {
  const std::string serve = keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string() + " --port 0";
  // The bundled model keeps 2 KiB of bf16 K/V per token: 0.0001 GiB (107 KB) holds 52 tokens.
  const CommandResult r = run_command(serve + " --context 4096 --kv-memory 0.0001");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--kv-memory"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("less than one 4096-token context"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lower --context"), std::string::npos) << r.output;

  // The same pool is enough for a context it can hold.
  ServerProcess small({"--context", "32", "--kv-memory", "0.0001"});
  auto client = small.client();
  const auto ok = post_json(client, "/v1/messages",
                            {{"model", "tiny-toolcaller"}, {"max_tokens", 3},
                             {"messages", nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}})}});
  EXPECT_EQ(ok.status, 200) << ok.text;
}

}  // namespace
}  // namespace keel::test
