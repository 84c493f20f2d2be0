#pragma once
// One StreamWriter per streamed response. The server calls start, then text / thinking / tool_use
// as the tool-call parser produces them, ping while waiting, and finish (or error) once; each call
// returns the Server-Sent Events text to write, possibly empty. The writer owns the protocol's
// block bookkeeping, so the server never has to know either event grammar.
//
// Anthropic (event: NAME\ndata: JSON\n\n): message_start; content blocks opened on their first
// delta that is not only whitespace (never an empty leading text block; whitespace before it is
// sent with it, whitespace before another kind of block is dropped) and closed when another kind
// starts;
// thinking blocks end with a signature_delta (empty: keel signs nothing) before content_block_stop;
// a tool_use is content_block_start (input {}), one input_json_delta holding the input JSON (key
// order kept), content_block_stop; finish sends message_delta (stop_reason, stop_sequence, usage)
// and message_stop.
//
// OpenAI (data: JSON\n\n): a first chunk with delta {"role":"assistant","content":""}; content and
// reasoning_content deltas; a tool call as delta.tool_calls [{index,id,type,function:{name,
// arguments:""}}] then one chunk with its arguments; logprobs in a chunk of their own (empty delta,
// "logprobs":{"content":[...]}), null in the others; finish sends a chunk with an empty delta and
// finish_reason, with include_usage a chunk with "choices":[] and usage (every earlier chunk then
// carries "usage":null), and data: [DONE].
//
// Threads: a writer keeps the open-block state of its one response, so it belongs to the HTTP
// thread that streams that response; make_stream_writer may be called from any thread.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "keel/api/api_error.h"
#include "keel/api/chat_request.h"
#include "keel/api/chat_result.h"

namespace keel::api {

class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // usage_so_far: the prompt's counts (output_tokens as known, usually 0 or 1).
  virtual std::string start(const std::string& id, const std::string& model, const Usage& usage_so_far) = 0;
  virtual std::string text(std::string_view delta) = 0;
  virtual std::string thinking(std::string_view delta) = 0;
  virtual std::string tool_use(const std::string& id, const std::string& name, const nlohmann::ordered_json& input) = 0;
  // OpenAI logprobs entries (openai_logprob_entries) of the next output tokens; the other
  // protocols carry none and write nothing.
  virtual std::string logprobs(const nlohmann::ordered_json& /*entries*/) { return {}; }
  virtual std::string finish(FinishReason reason, const std::string& stop_sequence, const Usage& usage) = 0;
  virtual std::string ping() = 0;
  // A failure after the stream started: the protocol's error event; the stream is over after it.
  virtual std::string error(const ApiError& error) = 0;
};

// The writer of the request's protocol (its include_usage and, for Responses, the settings the
// response object echoes).
std::unique_ptr<StreamWriter> make_stream_writer(const ChatRequest& request, int64_t created_unix);

}  // namespace keel::api
