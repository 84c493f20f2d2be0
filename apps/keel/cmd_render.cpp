// keel render: show the prompt a conversation becomes under a model's own chat template, and with
// --roles which role each part of it has (the roles the KV policy and eval work with).
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "keel/arch/model_source.h"
#include "keel/chat/chat_renderer.h"
#include "keel/chat/system_fold.h"
#include "keel/util/error.h"

namespace keel::cli {
namespace {

using json = nlohmann::ordered_json;

json read_json_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string(flag) + ": cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) throw Error(std::string(flag) + ": " + path + " is not valid JSON");
  return j;
}

}  // namespace

int render_command(const CommandArgs& argv) {
  Args args(argv, {"model", "messages", "tools", "kwargs"}, {"roles", "no-generation-prompt"});
  if (!args.positional().empty()) throw Error("unexpected argument '" + args.positional()[0] + "'");
  // The template keel serve renders with (ModelSource::chat_template), whether or not there are tools.
  const arch::ModelSource model = arch::resolve_model(args.require("model"));
  const chat::ChatTemplateSource& src = model.require_chat_template();

  // --messages takes a JSON array of messages, or a request body with "messages" (and "tools").
  json doc = read_json_file(args.require("messages"), "--messages");
  json messages = doc;
  json tools = nullptr;
  if (doc.is_object()) {
    if (!doc.contains("messages")) throw Error("--messages: the object has no \"messages\" field");
    messages = doc["messages"];
    if (doc.contains("tools")) tools = doc["tools"];
  }
  if (!messages.is_array()) throw Error("--messages: expected a JSON array of messages");
  if (args.has("tools")) tools = read_json_file(args.require("tools"), "--tools");
  if (!tools.is_null() && !tools.is_array()) throw Error("--tools: expected a JSON array of tools");

  json kwargs = json::object();
  kwargs["add_generation_prompt"] = !args.has("no-generation-prompt");
  if (args.has("kwargs")) {
    json extra = json::parse(args.require("kwargs"), nullptr, false);
    if (extra.is_discarded() || !extra.is_object()) throw Error("--kwargs: expected a JSON object, e.g. '{\"enable_thinking\": false}'");
    for (const auto& [k, v] : extra.items()) kwargs[k] = v;
  }

  chat::ChatTemplate tmpl(src.source, src.bos_token, src.eos_token);
  // The same rendering serve uses: later system messages in place, or folded where the template
  // cannot take them.
  chat::RenderedPrompt prompt = chat::render_conversation(tmpl, messages, tools, kwargs).prompt;

  if (!args.has("roles")) {
    std::fwrite(prompt.text.data(), 1, prompt.text.size(), stdout);
    return 0;
  }
  for (const auto& span : prompt.spans) {
    std::string text = json(prompt.text.substr(span.begin, span.end - span.begin)).dump();
    std::printf("%-11s %s\n", std::string(chat::role_name(span.role)).c_str(), text.c_str());
  }
  return 0;
}

}  // namespace keel::cli
