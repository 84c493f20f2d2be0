// The official SDKs against a real `keel serve` on the bundled tiny-toolcaller: @anthropic-ai/sdk
// and openai (versions pinned in tests/clients/package-lock.json, installed into <build>/clients
// by scripts/install-client-tests.sh). Each test runs one case of tests/clients/anthropic_sdk.cjs
// or openai_sdk.cjs with node; the script checks what the SDK parsed and prints "ok CASE: ...".
// Skipped when npm/node are not installed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "client_support.h"
#include "server_support.h"

namespace keel::test {
namespace {

class ClientSdk : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!client_install().skip_reason.empty() || !client_install().error.empty()) return;
    server_ = std::make_unique<ServerProcess>();
  }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override {
    if (!client_install().skip_reason.empty()) GTEST_SKIP() << client_install().skip_reason;
    ASSERT_TRUE(client_install().error.empty()) << client_install().error;
  }

  // Runs `node tests/clients/SCRIPT PORT CASE` and expects exit 0 and "ok CASE:" on stdout.
  static void run_case(const std::string& script, const std::string& name) {
    const ClientInstall& install = client_install();
    std::vector<std::string> env = {"PATH=" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin"),
                                    "NODE_PATH=" + install.node_modules.string(), "HOME=/nonexistent"};
    const ProcessResult r =
        run_process({install.node.string(), (client_scripts_dir() / script).string(), std::to_string(server_->port()), name},
                    env, client_scripts_dir(), std::chrono::seconds(400));
    EXPECT_FALSE(r.timed_out) << script << " " << name << " timed out after " << r.seconds << " s";
    EXPECT_EQ(r.exit_code, 0) << script << " " << name << ":\n" << r.out << r.err << "\nserver log:\n" << server_->log();
    EXPECT_NE(r.out.find("ok " + name + ":"), std::string::npos) << r.out << r.err;
    std::cout << r.out;
  }

  static std::unique_ptr<ServerProcess> server_;
};

std::unique_ptr<ServerProcess> ClientSdk::server_;

TEST_F(ClientSdk, AnthropicMessagesCreateWithTool) { run_case("anthropic_sdk.cjs", "messages_create"); }
TEST_F(ClientSdk, AnthropicMessagesCreateStreamWithTool) { run_case("anthropic_sdk.cjs", "messages_create_stream"); }
TEST_F(ClientSdk, AnthropicMessagesStreamHelperWithTool) { run_case("anthropic_sdk.cjs", "messages_stream"); }
TEST_F(ClientSdk, AnthropicCountTokens) { run_case("anthropic_sdk.cjs", "count_tokens"); }
TEST_F(ClientSdk, AnthropicStructuredOutputParsed) { run_case("anthropic_sdk.cjs", "messages_parse_output_format"); }
TEST_F(ClientSdk, AnthropicModelsList) { run_case("anthropic_sdk.cjs", "models_list"); }
TEST_F(ClientSdk, AnthropicModelsRetrieve) { run_case("anthropic_sdk.cjs", "models_retrieve"); }

TEST_F(ClientSdk, OpenAIChatCreateWithTools) { run_case("openai_sdk.cjs", "chat_create"); }
TEST_F(ClientSdk, OpenAIChatCreateStreamWithTools) { run_case("openai_sdk.cjs", "chat_create_stream"); }
TEST_F(ClientSdk, OpenAIChatStreamHelperWithTools) { run_case("openai_sdk.cjs", "chat_stream_helper"); }
TEST_F(ClientSdk, OpenAIChatNamedToolIsCalled) { run_case("openai_sdk.cjs", "chat_named_tool"); }
TEST_F(ClientSdk, OpenAIResponsesCreateWithToolRoundTrip) { run_case("openai_sdk.cjs", "responses_create"); }
TEST_F(ClientSdk, OpenAIResponsesStreamHelperWithTool) { run_case("openai_sdk.cjs", "responses_stream"); }
TEST_F(ClientSdk, OpenAIResponsesErrorsInOpenAIShape) { run_case("openai_sdk.cjs", "responses_errors"); }
TEST_F(ClientSdk, OpenAIChatParseJsonSchema) { run_case("openai_sdk.cjs", "chat_parse_json_schema"); }
TEST_F(ClientSdk, OpenAIChatStreamJsonSchemaAndJsonObject) { run_case("openai_sdk.cjs", "chat_stream_json_schema"); }
TEST_F(ClientSdk, OpenAIResponsesParseJsonSchema) { run_case("openai_sdk.cjs", "responses_parse_json_schema"); }
TEST_F(ClientSdk, OpenAIJsonSchemaTheGrammarCannotHonourIsRefused) { run_case("openai_sdk.cjs", "chat_json_schema_refused"); }
TEST_F(ClientSdk, OpenAIChatLogprobsStreamedAndNot) { run_case("openai_sdk.cjs", "chat_logprobs"); }
TEST_F(ClientSdk, OpenAIChatThreeChoicesEqualThreeSeededRequests) { run_case("openai_sdk.cjs", "chat_n_choices"); }
TEST_F(ClientSdk, OpenAIModelsList) { run_case("openai_sdk.cjs", "models_list"); }
TEST_F(ClientSdk, OpenAIModelsRetrieve) { run_case("openai_sdk.cjs", "models_retrieve"); }

}  // namespace
}  // namespace keel::test
