// keel render prints the prompt from the model folder's own template, and --roles the spans.
#include <gtest/gtest.h>

#include <fstream>

#include "test_support.h"

namespace {

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

}  // namespace

TEST(ChatRenderCli, PrintsPromptAndRoles) {
  keel::test::TempDir dir;
  write(dir.path() / "messages.json", R"([
    {"role": "user", "content": "List /tmp"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "Bash", "arguments": "{\"command\": \"ls /tmp\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}])");
  write(dir.path() / "tools.json", R"([{"type": "function", "function": {"name": "Bash",
    "description": "Run a command", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}])");
  std::string base = keel::test::keel_binary().string() + " render --model " +
                     (keel::test::shared_dir() / "models/tiny-toolcaller").string() + " --messages " +
                     (dir.path() / "messages.json").string() + " --tools " + (dir.path() / "tools.json").string();

  auto plain = keel::test::run_command(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"Bash\""), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls /tmp\"}}\n</tool_call>"),
            std::string::npos)
      << plain.output;
  EXPECT_TRUE(plain.output.ends_with("<|im_start|>assistant\n")) << plain.output;

  auto roles = keel::test::run_command(base + " --roles");
  ASSERT_EQ(roles.exit_code, 0) << roles.output;
  EXPECT_NE(roles.output.find("tools       \"{\\\"type\\\": \\\"function\\\""), std::string::npos) << roles.output;
  EXPECT_NE(roles.output.find("tool_result \"a.txt\""), std::string::npos) << roles.output;
  EXPECT_NE(roles.output.find("user        \"List /tmp\""), std::string::npos) << roles.output;
  EXPECT_NE(roles.output.find("tool_call   \"{\\\"command\\\": \\\"ls /tmp\\\"}\""), std::string::npos) << roles.output;
  EXPECT_TRUE(roles.output.ends_with("<|im_start|>assistant\\n\"\n")) << roles.output;  // the generation prompt

  // A model folder without a chat template.
  std::filesystem::copy_file(keel::test::shared_dir() / "models/tiny-toolcaller/config.json", dir.path() / "config.json");
  auto missing = keel::test::run_command(keel::test::keel_binary().string() + " render --model " +
                                         dir.path().string() + " --messages " + (dir.path() / "messages.json").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("no chat template"), std::string::npos) << missing.output;
}
