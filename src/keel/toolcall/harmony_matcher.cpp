// gpt-oss Harmony: every message is a header, <|message|>, a body and a terminator. The header
// decides what the body is: a recipient (" to=functions.NAME") makes it a call's JSON arguments,
// the analysis channel makes it reasoning, final and plain commentary make it text.
//   <|channel|>analysis<|message|>...<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
//   <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>
//   <|start|>assistant<|channel|>final<|message|>...<|return|>
// The generation prompt ends with "<|start|>assistant", so output may open with " to=" or
// "<|channel|>" directly.
#include <array>

#include "keel/toolcall/call_matchers.h"
#include "keel/toolcall/json_scan.h"

namespace keel::toolcall::detail {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
// A header is a handful of words; one this long without <|message|> is not a header.
constexpr size_t kMaxHeaderBytes = 512;
constexpr std::array<std::string_view, 4> kTerminators = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};

// The word after `key` in the header, up to a space or the next marker.
std::string header_word(std::string_view header, std::string_view key) {
  const size_t k = header.find(key);
  if (k == std::string_view::npos) return "";
  size_t i = k + key.size();
  const size_t start = i;
  while (i < header.size() && header[i] != ' ' && header[i] != '<' && header[i] != '\n') ++i;
  return std::string(header.substr(start, i - start));
}

Match call_body(std::string_view at, size_t body, std::string name, bool eof) {
  auto cut = [&] { return eof ? consumed(at.size(), {truncated_call(at, name)}) : need_more(); };
  const size_t args = skip_json_space(at, body);
  const JsonScan scan = scan_json_value(at, args);
  if (scan.status == JsonScan::Status::Incomplete) return cut();
  if (scan.status == JsonScan::Status::Invalid) {
    // The body runs to the call's terminator.
    const size_t k = at.find("<|call|>", args);
    if (k == std::string_view::npos && !eof) return need_more();
    const size_t end = k == std::string_view::npos ? at.size() : k + 8;
    ParsedCall call;
    call.name = std::move(name);
    call.problem = "arguments are not valid JSON: " + scan.error;
    call.truncated = k == std::string_view::npos;
    call.raw = std::string(at.substr(0, end));
    return consumed(end, {std::move(call)});
  }
  const size_t k = skip_json_space(at, scan.end);
  size_t end = scan.end;
  bool any_partial = false;
  bool closed = false;
  for (std::string_view term : {std::string_view("<|call|>"), std::string_view("<|end|>")}) {
    bool partial = false;
    if (starts_with_at(at, k, term, partial)) {
      end = k + term.size();
      closed = true;
      break;
    }
    any_partial = any_partial || partial;
  }
  if (!closed && (k >= at.size() || any_partial)) {
    if (!eof) return need_more();
    end = at.size();
  }
  ParsedCall call = call_with_json_arguments(std::move(name), at.substr(args, scan.end - args));
  call.raw = std::string(at.substr(0, end));
  return consumed(end, {std::move(call)});
}

}  // namespace

Match match_harmony_header(std::string_view at, size_t marker_size, bool eof) {
  // Everything is decided within the first kMaxHeaderBytes, so a longer buffer never changes an
  // answer a shorter one already gave.
  const std::string_view window = at.substr(0, kMaxHeaderBytes);
  const size_t msg = window.find(kMessage, marker_size);
  const size_t limit = msg == std::string_view::npos ? window.size() : msg;
  // A terminator inside the header means this was not one.
  for (std::string_view term : kTerminators) {
    if (window.substr(marker_size, limit - marker_size).find(term) != std::string_view::npos) return not_call(marker_size);
  }
  if (msg == std::string_view::npos) {
    if (at.size() >= kMaxHeaderBytes) return not_call(marker_size);
    if (!eof) return need_more();
    const std::string recipient = header_word(at, "to=");
    if (!recipient.empty()) return consumed(at.size(), {truncated_call(at, recipient.substr(recipient.find('.') + 1))});
    return consumed(at.size());
  }
  const std::string_view header = at.substr(0, msg);
  const size_t body = msg + kMessage.size();
  std::string recipient = header_word(header, "to=");
  if (!recipient.empty() && recipient != "assistant" && recipient != "user") {
    // "functions.NAME"; other namespaces (browser., python) keep their full name.
    if (recipient.rfind("functions.", 0) == 0) recipient = recipient.substr(10);
    return call_body(at, body, std::move(recipient), eof);
  }
  const std::string channel = header_word(header, kChannel);
  return consumed(body, {}, channel == "analysis" ? Region::Reasoning : Region::Text);
}

}  // namespace keel::toolcall::detail
