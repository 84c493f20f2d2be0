// Fuzz target: the streaming tool-call parser. The first byte picks the format and the reasoning
// options; the rest is the model output, fed once whole and once in pseudo-random pieces (sizes
// drawn from the input itself, so a crash replays exactly). Neither run may crash, and the two
// must give the same events once adjacent text deltas are joined: split invariance is what lets
// the server stream without ever changing its mind about what it already sent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "keel/toolcall/tool_call_parser.h"

namespace {

using keel::toolcall::ParseEvent;
using keel::toolcall::ToolCallFormat;

constexpr ToolCallFormat kFormats[] = {ToolCallFormat::Hermes,   ToolCallFormat::Qwen3CoderXml, ToolCallFormat::Llama3Json,
                                       ToolCallFormat::Mistral,  ToolCallFormat::DeepSeek,      ToolCallFormat::Harmony,
                                       ToolCallFormat::Gemma4,   ToolCallFormat::None};

std::string summary(const std::vector<ParseEvent>& events) {
  std::string out;
  for (const ParseEvent& e : keel::toolcall::coalesce_events(events)) {
    out += std::to_string(static_cast<int>(e.kind)) + ":";
    if (e.kind == ParseEvent::Kind::Call) {
      const auto& c = e.call;
      out += c.name + "|" + c.arguments.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "|" +
             c.raw + "|" + c.problem + "|" + (c.truncated ? "t" : "") + (c.arguments_are_strings ? "s" : "");
      // A call that parsed always carries an arguments object.
      if (c.problem.empty() && !c.arguments.is_object()) std::abort();
      if (c.truncated && c.problem.empty()) std::abort();
    } else {
      out += e.text;
    }
    out += "\n";
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  keel::toolcall::OutputParserOptions options;
  options.format = kFormats[data[0] & 7];
  options.reasoning = (data[0] & 0x10) != 0;
  options.starts_in_reasoning = (data[0] & 0x20) != 0;
  const std::string_view output(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::string whole = summary(keel::toolcall::parse_output(options, output));

  uint32_t state = 2166136261u;
  for (size_t i = 0; i < size; ++i) state = (state ^ data[i]) * 16777619u;
  std::vector<ParseEvent> events;
  auto parser = keel::toolcall::make_output_parser(options);
  for (size_t i = 0; i < output.size();) {
    state = state * 1103515245u + 12345u;
    const size_t n = 1 + (state >> 16) % 9;
    parser->feed(output.substr(i, n), events);
    i += n;
  }
  parser->finish(events);
  if (summary(events) != whole) {
    std::fprintf(stderr, "split changed the events:\n--- whole\n%s--- pieces\n%s", whole.c_str(), summary(events).c_str());
    std::abort();
  }
  return 0;
}
