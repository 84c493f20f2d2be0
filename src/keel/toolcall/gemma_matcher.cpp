// Gemma 4: <|tool_call>call:NAME{key:<|"|>text<|"|>,n:5}<tool_call|>, as its chat template renders
// assistant calls, and the collapsed <tool_call:NAME{...} opener some checkpoints write instead.
#include "keel/toolcall/call_matchers.h"
#include "keel/toolcall/gemma_args.h"
#include "keel/toolcall/json_scan.h"

namespace keel::toolcall::detail {
namespace {

constexpr std::string_view kClose = "<tool_call|>";
constexpr size_t kMaxNameBytes = 256;

Match gemma_call_from(std::string_view at, size_t i, bool eof) {
  auto cut = [&](std::string name) { return eof ? consumed(at.size(), {truncated_call(at, std::move(name))}) : need_more(); };
  const size_t brace = at.find('{', i);
  const size_t name_end = brace == std::string_view::npos ? at.size() : brace;
  for (size_t k = i; k < name_end; ++k) {
    const char c = at[k];
    if (c == '<' || c == '\n' || c == ' ' || k - i >= kMaxNameBytes) {
      ParsedCall call;
      call.problem = "no {arguments} after the tool name";
      call.name = std::string(at.substr(i, k - i));
      call.raw = std::string(at.substr(0, k));
      return consumed(k, {std::move(call)});
    }
  }
  std::string name(at.substr(i, name_end - i));
  if (brace == std::string_view::npos) return cut(name);
  GemmaValue args = parse_gemma_value(at, brace);
  if (args.status == GemmaValue::Status::Incomplete) return cut(name);
  if (args.status == GemmaValue::Status::Invalid) {
    // Runs to the closing marker when there is one.
    const size_t k = at.find(kClose, brace);
    if (k == std::string_view::npos && !eof) return need_more();
    const size_t end = k == std::string_view::npos ? at.size() : k + kClose.size();
    ParsedCall call;
    call.name = std::move(name);
    call.problem = "arguments are not valid Gemma call syntax: " + args.error;
    call.truncated = k == std::string_view::npos;
    call.raw = std::string(at.substr(0, end));
    return consumed(end, {std::move(call)});
  }
  size_t end = args.end;
  const size_t k = skip_json_space(at, args.end);
  bool partial = false;
  if (starts_with_at(at, k, kClose, partial)) {
    end = k + kClose.size();
  } else if (k >= at.size() || partial) {
    if (!eof) return need_more();
    end = at.size();
  }
  ParsedCall call;
  call.name = std::move(name);
  call.arguments = std::move(args.value);
  if (name_end == i) call.problem = "the call names no tool";
  call.raw = std::string(at.substr(0, end));
  return consumed(end, {std::move(call)});
}

}  // namespace

Match match_gemma_call(std::string_view at, size_t marker_size, bool eof) {
  bool partial = false;
  if (starts_with_at(at, marker_size, "call:", partial)) return gemma_call_from(at, marker_size + 5, eof);
  if (partial) return eof ? consumed(at.size(), {truncated_call(at)}) : need_more();
  return gemma_call_from(at, marker_size, eof);  // "call:" left out: the name follows directly
}

Match match_gemma_collapsed_call(std::string_view at, size_t marker_size, bool eof) {
  return gemma_call_from(at, marker_size, eof);
}

}  // namespace keel::toolcall::detail
