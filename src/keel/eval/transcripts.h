#pragma once
// Recorded conversations for teacher-forced fidelity runs. File format: JSON Lines, one
// conversation per line:
//   {"name": "...", "messages": [OpenAI-form messages, tool_calls and tool results included],
//    "tools": [{"type": "function", "function": {...}}] or absent}
// Empty lines are skipped.
//
// Threads: plain values and pure functions (load_transcripts reads only its own file): any thread.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace keel::eval {

struct Transcript {
  std::string name;
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  // null for none
};

// Throws keel::Error naming the file and line of anything malformed.
std::vector<Transcript> load_transcripts(const std::filesystem::path& path);
std::vector<Transcript> parse_transcripts(const std::string& text, const std::string& where);
// One JSON line for `t` (what load_transcripts reads back).
std::string transcript_line(const Transcript& t);

}  // namespace keel::eval
