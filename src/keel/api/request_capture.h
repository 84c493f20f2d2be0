#pragma once
// keel serve --capture-requests DIR: the body of every admitted chat request, saved as a file a
// later `keel serve --warm FILE` can prefill (docs/claude-code.md). The bodies are the client's
// whole conversations: the folder is created private (0700) and each file 0600.
//
// Threads: any HTTP worker, concurrently (each file has its own name).
#include <filesystem>
#include <string>
#include <string_view>

namespace keel::api {

// Writes `body` to DIR/<UTC time>-<n>-<route>.json (route "messages" or "chat-completions") through
// a temp file and a rename. A failure is logged (once) and otherwise ignored: capturing never fails
// a request.
void capture_request(const std::filesystem::path& dir, std::string_view route, const std::string& body);

}  // namespace keel::api
