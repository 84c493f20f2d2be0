// Fuzz target: any template text must either render or fail with keel::Error — never crash, hang
// or exhaust memory. Templates that parse are rendered against a small tool-calling conversation
// with tight sandbox limits, so mutated loops and string doubling hit the bounds quickly.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "keel/chat/jinja_template.h"
#include "keel/util/error.h"

namespace {

const keel::jinja::DictData& fuzz_context() {
  static const keel::jinja::DictData context = [] {
    auto doc = nlohmann::ordered_json::parse(R"({
      "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true, "enable_thinking": false,
      "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi é"},
        {"role": "assistant", "content": "", "reasoning_content": "think",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": {"command": "ls", "n": [1, 2.5]}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}
      ],
      "tools": [{"type": "function", "function": {"name": "Bash", "description": "run",
                 "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
    })");
    keel::jinja::DictData d;
    for (const auto& [k, v] : doc.items()) d.set(k, keel::jinja::value_from_json(v, 1));
    return d;
  }();
  return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view source(reinterpret_cast<const char*>(data), size);
  keel::jinja::RenderOptions options;
  options.max_loop_iterations = 20000;
  options.max_output_bytes = 1 << 20;
  options.max_call_depth = 32;
  try {
    keel::jinja::Template t(source);
    (void)t.render(fuzz_context(), options);
  } catch (const keel::Error&) {
  }
  return 0;
}
