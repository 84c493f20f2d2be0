#include "keel/eval/transcripts.h"

#include <fstream>
#include <sstream>

#include "keel/util/error.h"

namespace keel::eval {

std::vector<Transcript> parse_transcripts(const std::string& text, const std::string& where) {
  std::vector<Transcript> out;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string at = where + ":" + std::to_string(line_no);
    auto j = nlohmann::ordered_json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw Error(at + ": not a JSON object");
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
      throw Error(at + ": \"messages\" must be a non-empty array");
    Transcript t;
    t.name = j.value("name", "line " + std::to_string(line_no));
    t.messages = j["messages"];
    if (j.contains("tools") && !j["tools"].is_null()) {
      if (!j["tools"].is_array()) throw Error(at + ": \"tools\" must be an array");
      t.tools = j["tools"];
    }
    out.push_back(std::move(t));
  }
  if (out.empty()) throw Error(where + ": no transcripts");
  return out;
}

std::vector<Transcript> load_transcripts(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read transcripts " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_transcripts(ss.str(), path.string());
}

std::string transcript_line(const Transcript& t) {
  nlohmann::ordered_json j = {{"name", t.name}, {"messages", t.messages}};
  if (!t.tools.is_null()) j["tools"] = t.tools;
  return j.dump();
}

}  // namespace keel::eval
