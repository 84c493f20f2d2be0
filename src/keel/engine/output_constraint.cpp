#include "keel/engine/output_constraint.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "keel/constrain/json_schema.h"
#include "keel/engine/served_model.h"
#include "keel/toolcall/output_syntax.h"

namespace keel {
namespace {

using Json = nlohmann::ordered_json;
using constrain::Grammar;

// Leading whitespace, then the value: models often put a newline first. An answer may end in
// whitespace too (a "}\n" token); a call's grammar ends with its value, and the token that closes
// it may go on past it (open_end).
std::shared_ptr<const Grammar> finish(Grammar grammar, uint32_t value, bool trailing_space = false) {
  std::vector<uint32_t> parts{grammar.add_whitespace(), value};
  if (trailing_space) parts.push_back(grammar.add_whitespace());
  grammar.root = grammar.add_sequence(std::move(parts));
  return std::make_shared<const Grammar>(std::move(grammar));
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string_view call_marker(toolcall::ToolCallFormat format) {
  switch (format) {
    case toolcall::ToolCallFormat::Hermes:
    case toolcall::ToolCallFormat::Qwen3CoderXml: return "<tool_call>";
    case toolcall::ToolCallFormat::Llama3Json: return "<|python_tag|>";
    case toolcall::ToolCallFormat::Mistral: return "[TOOL_CALLS]";
    case toolcall::ToolCallFormat::Gemma4: return "<|tool_call>";
    default: return {};
  }
}

// The arguments' key in the call object of the JSON formats.
std::string_view arguments_key(toolcall::ToolCallFormat format) {
  return format == toolcall::ToolCallFormat::Llama3Json ? "parameters" : "arguments";
}

// Harmony: the tool a header that ends in <|message|> addresses ("to=functions.NAME ..."), or "".
std::string harmony_recipient(std::string_view text) {
  const size_t start = text.rfind("<|start|>");
  const std::string_view header = text.substr(start == std::string_view::npos ? 0 : start);
  const size_t to = header.rfind("to=functions.");
  if (to == std::string_view::npos) return {};
  const std::string_view rest = header.substr(to + 13);
  return std::string(rest.substr(0, std::min(rest.find("<|"), rest.find(' '))));
}

// Mistral's [TOOL_CALLS]NAME[ARGS]{...} (or NAME[CALL_ID]ID[ARGS]): the tool the text's last
// call names, or "".
std::string mistral_tool_name(std::string_view text) {
  const size_t marker = text.rfind("[TOOL_CALLS]");
  if (marker == std::string_view::npos) return {};
  std::string_view name = text.substr(marker + 12);
  name = name.substr(0, name.find('['));
  while (!name.empty() && (name.front() == ' ' || name.front() == '\n')) name.remove_prefix(1);
  while (!name.empty() && (name.back() == ' ' || name.back() == '\n')) name.remove_suffix(1);
  return std::string(name);
}

// Qwen3-Coder's XML call after <tool_call>: <function=NAME>, then <parameter=KEY>VALUE</parameter>
// per parameter, then </function>, with whitespace between the tags (the template writes a
// newline after each; models do not always). Parameters come in the schema's order (the order
// the template renders), the required ones always, each optional one or not. A value is raw text,
// which the parser takes as it is (less one newline each side), up to </parameter>; where the
// schema allows no string it is the JSON of its schema, and an enum of strings is one of them,
// each between optional newlines. A tool that is not constrained takes anything up to </function>.
class XmlCallBuilder {
 public:
  explicit XmlCallBuilder(Grammar& grammar) : g_(grammar) {}

  uint32_t function(const std::string& name, const Json& schema, bool constrained) {
    std::vector<uint32_t> parts{g_.add_literal("<function=" + name + ">")};
    const Json* properties = schema.is_object() && schema.contains("properties") ? &schema["properties"] : nullptr;
    std::vector<std::string> required;
    if (schema.is_object() && schema.contains("required") && schema["required"].is_array())
      for (const Json& key : schema["required"])
        if (key.is_string()) required.push_back(key.get<std::string>());
    const bool covered = std::all_of(required.begin(), required.end(), [&](const std::string& key) {
      return properties != nullptr && properties->is_object() && properties->contains(key);
    });
    if (!constrained || !covered || (properties != nullptr && !properties->is_object())) {
      parts.push_back(g_.add_text(std::string(kFunctionEnd)));
      return g_.add_sequence(std::move(parts));
    }
    parts.push_back(g_.add_whitespace());
    if (properties != nullptr)
      for (const auto& [key, value_schema] : properties->items()) {
        const uint32_t parameter = g_.add_sequence({g_.add_literal("<parameter=" + key + ">"),
                                                    value(value_schema, "tools." + name + ".parameters.properties." + key),
                                                    g_.add_whitespace()});
        const bool needed = std::find(required.begin(), required.end(), key) != required.end();
        parts.push_back(needed ? parameter : optional(parameter));
      }
    parts.push_back(g_.add_literal(kFunctionEnd));
    return g_.add_sequence(std::move(parts));
  }

 private:
  static constexpr std::string_view kValueEnd = "</parameter>";
  static constexpr std::string_view kFunctionEnd = "</function>";

  // What follows <parameter=KEY>, its closing tag included.
  uint32_t value(const Json& schema, const std::string& where) {
    if (schema.is_object() && schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty() &&
        std::all_of(schema["enum"].begin(), schema["enum"].end(), [](const Json& v) { return v.is_string(); })) {
      std::vector<std::string> texts;
      for (const Json& v : schema["enum"]) texts.push_back(v.get<std::string>());
      constrain::GrammarNode node;
      node.kind = constrain::NodeKind::Literals;
      node.trie = constrain::ByteTrie(std::move(texts));
      return between_newlines(g_.add(std::move(node)));
    }
    if (schema.is_object() && !allows_string(schema)) {
      try {
        return between_newlines(constrain::add_json_schema(g_, schema, where, constrain::UndeclaredKeys::Closed));
      } catch (const constrain::SchemaError&) {
        // Left to validation after the fact, as raw text.
      }
    }
    return g_.add_text(std::string(kValueEnd));
  }

  // The newline the parser strips on each side of a value, or none, then the closing tag.
  uint32_t between_newlines(uint32_t node) {
    return g_.add_sequence({optional(g_.add_literal("\n")), node, optional(g_.add_literal("\n")), g_.add_literal(kValueEnd)});
  }

  // Whether a value of the schema may be a string, as far as its type says (no type: it may).
  static bool allows_string(const Json& schema) {
    for (const char* key : {"anyOf", "oneOf", "allOf", "$ref", "not"})
      if (schema.contains(key)) return true;
    if (!schema.contains("type")) return !schema.contains("const") || schema["const"].is_string();
    const Json& type = schema["type"];
    if (type.is_string()) return type == "string";
    return !type.is_array() || std::find(type.begin(), type.end(), Json("string")) != type.end();
  }

  uint32_t optional(uint32_t node) {
    constrain::GrammarNode choice;
    choice.kind = constrain::NodeKind::Choice;
    choice.children = {node, g_.add_sequence({})};
    return g_.add(std::move(choice));
  }

  Grammar& g_;
};

}  // namespace

std::shared_ptr<const Grammar> compile_answer_grammar(const Json& schema, const std::string& where) {
  // The schemas answers were asked for lately, compiled: a client asks for the same one again (a
  // title, a plan), and the grammar keeps its masks. Errors are thrown before anything is kept.
  static std::mutex mutex;
  static std::list<std::pair<std::string, std::shared_ptr<const Grammar>>> recent;  // most recent first
  std::string key = schema.dump();
  {
    std::lock_guard lock(mutex);
    for (auto it = recent.begin(); it != recent.end(); ++it)
      if (it->first == key) {
        recent.splice(recent.begin(), recent, it);
        return it->second;
      }
  }
  Grammar grammar;
  const uint32_t value = constrain::add_json_schema(grammar, schema, where);
  if (!grammar.unenforced.empty())
    throw constrain::SchemaError(where + grammar.unenforced.front() +
                                 ": this keyword would not be enforced by constrained decoding, and nothing checks a "
                                 "structured answer afterwards; remove it from the schema");
  std::shared_ptr<const Grammar> built = finish(std::move(grammar), value, true);
  std::lock_guard lock(mutex);
  recent.emplace_front(std::move(key), built);
  if (recent.size() > CallGrammarCache::kRecent) recent.pop_back();
  return built;
}

std::shared_ptr<const Grammar> any_object_grammar() {
  static const std::shared_ptr<const Grammar> grammar = [] {
    Grammar g;
    const uint32_t value = constrain::add_json_schema(g, Json{{"type", "object"}}, "json_object");
    return finish(std::move(g), value, true);
  }();
  return grammar;
}

void add_call_grammars(OutputGrammars& out, toolcall::ToolCallFormat format, const Json& tools,
                       const std::function<bool(const std::string&)>& include) {
  using toolcall::ToolCallFormat;
  if (!tools.is_array() || tools.empty()) return;
  // The formats whose calls are one JSON object {"name", "arguments"|"parameters"} (Mistral's
  // [TOOL_CALLS] array holds such objects), whose calls name the tool before its arguments
  // (Harmony's header, Mistral's NAME[ARGS]), and Qwen3-Coder's XML.
  const bool json_call =
      format == ToolCallFormat::Hermes || format == ToolCallFormat::Llama3Json || format == ToolCallFormat::Mistral;
  const bool named_arguments = format == ToolCallFormat::Harmony || format == ToolCallFormat::Mistral;
  const bool xml_call = format == ToolCallFormat::Qwen3CoderXml;
  const bool gemma_call = format == ToolCallFormat::Gemma4;  // call:NAME{key:value,...}
  if (!json_call && !named_arguments && !xml_call && !gemma_call) return;
  // A tool's arguments are an object whatever its schema leaves open: a schema without a type
  // (and without a combinator that may give one) is read as an object's.
  auto parameters_of = [](const Json& function) {
    Json schema = function.contains("parameters") && !function["parameters"].is_null()
                      ? function["parameters"]
                      : Json{{"type", "object"}, {"properties", Json::object()}};
    const bool open_type = schema.is_object() && !schema.contains("type");
    if (open_type && !schema.contains("$ref") && !schema.contains("anyOf") && !schema.contains("oneOf") &&
        !schema.contains("allOf") && !schema.contains("enum") && !schema.contains("const"))
      schema["type"] = "object";
    return schema;
  };
  // A tool's arguments node in `grammar`: its schema, or any object when it is not constrained.
  auto arguments = [&](Grammar& grammar, const std::string& name, const Json& function) {
    if (include(name)) {
      try {
        return constrain::add_json_schema(grammar, parameters_of(function), "tools." + name + ".parameters",
                                          constrain::UndeclaredKeys::Closed);
      } catch (const constrain::SchemaError&) {
        if (std::find(out.unconstrained_tools.begin(), out.unconstrained_tools.end(), name) == out.unconstrained_tools.end())
          out.unconstrained_tools.push_back(name);
      }
    }
    return constrain::add_json_schema(grammar, Json{{"type", "object"}}, "");
  };
  Grammar calls;
  if (gemma_call) calls.syntax = constrain::ValueSyntax::Gemma;
  XmlCallBuilder xml(calls);
  std::vector<uint32_t> alternatives;
  bool any_included = false;
  for (const Json& tool : tools) {
    const Json& function = tool.contains("function") ? tool["function"] : tool;
    const std::string name = function.value("name", "");
    if (name.empty()) continue;
    any_included = any_included || include(name);
    if (json_call) {
      const uint32_t args = arguments(calls, name, function);
      const uint32_t name_node = calls.add_literal(Json(name).dump());
      alternatives.push_back(constrain::add_closed_object(calls, {{"name", name_node}, {std::string(arguments_key(format)), args}}));
    }
    if (xml_call) alternatives.push_back(xml.function(name, parameters_of(function), include(name)));
    if (gemma_call) alternatives.push_back(calls.add_sequence({calls.add_literal("call:" + name), arguments(calls, name, function)}));
    if (named_arguments) {
      Grammar one;
      const uint32_t args = arguments(one, name, function);
      out.arguments[name] = finish(std::move(one), args);
    }
  }
  if (!any_included) {
    out.arguments.clear();
    return;
  }
  if (alternatives.empty()) return;
  constrain::GrammarNode choice;
  choice.kind = constrain::NodeKind::Choice;
  choice.children = std::move(alternatives);
  uint32_t node = calls.add(std::move(choice));
  if (format == ToolCallFormat::Mistral) {
    // [TOOL_CALLS][{call}, {call}, ...]
    constrain::GrammarNode array;
    array.kind = constrain::NodeKind::Array;
    array.items = node;
    array.min_items = 1;
    node = calls.add(std::move(array));
  }
  out.any_call = finish(std::move(calls), node);
}

std::shared_ptr<const OutputGrammars> CallGrammarCache::get(toolcall::ToolCallFormat format, const Json& tools,
                                                            const std::map<std::string, bool>& strict, bool default_on) {
  std::string key = std::to_string(static_cast<int>(format)) + (default_on ? "+" : "-") + tools.dump();
  for (const auto& [name, on] : strict) key += "\n" + name + (on ? "+" : "-");
  {
    std::lock_guard lock(mutex_);
    for (auto it = recent_.begin(); it != recent_.end(); ++it)
      if (it->first == key) {
        recent_.splice(recent_.begin(), recent_, it);
        return it->second;
      }
  }
  auto grammars = std::make_shared<OutputGrammars>();
  add_call_grammars(*grammars, format, tools, [&](const std::string& name) {
    const auto it = strict.find(name);
    return it != strict.end() ? it->second : default_on;
  });
  std::shared_ptr<const OutputGrammars> built;
  if (grammars->any_call || !grammars->arguments.empty()) built = std::move(grammars);
  std::lock_guard lock(mutex_);
  recent_.emplace_front(std::move(key), built);
  if (recent_.size() > kRecent) recent_.pop_back();
  return built;
}

OutputConstrainer::OutputConstrainer(std::shared_ptr<const OutputGrammars> grammars, const constrain::Vocabulary* vocabulary,
                                     toolcall::ToolCallFormat format, std::vector<int32_t> end_ids,
                                     std::vector<int32_t> start_ids)
    : grammars_(std::move(grammars)),
      vocabulary_(grammars_ ? vocabulary : nullptr),
      format_(format),
      end_ids_(std::move(end_ids)),
      start_ids_(std::move(start_ids)),
      allowed_(grammars_ && vocabulary ? vocabulary->rows() : 0) {}

void OutputConstrainer::mask(std::span<float> logits, const OutputPosition& at) {
  if (!grammars_) return;
  constrain::TokenConstraint* constraint = call_ ? &*call_ : nullptr;
  const bool answer_begun = format_ == toolcall::ToolCallFormat::Harmony
                                ? answer_.has_value() || ends_with(at.text, "<|channel|>final<|message|>")
                                : !at.in_reasoning;
  if (!constraint && grammars_->answer && !answer_done_ && answer_begun) {
    if (!answer_) {
      answer_.emplace(grammars_->answer, *vocabulary_);
      answer_fed_ = false;
    }
    constraint = &*answer_;
  }
  if (!constraint) return;
  const auto start = std::chrono::steady_clock::now();
  constraint->allowed(allowed_);
  if (constraint == (answer_ ? &*answer_ : nullptr)) {
    if (!answer_fed_)
      for (int32_t id : start_ids_) allowed_.set(id);
    if (constraint->accepting())
      for (int32_t id : end_ids_) allowed_.set(id);
  }
  if (allowed_.count() == 0) {
    // Nothing the grammar allows is a token (cannot happen with the grammars keel builds): let go
    // rather than force a token nothing allows.
    call_.reset();
    answer_done_ = true;
    answer_.reset();
    return;
  }
  const size_t rows = std::min(logits.size(), allowed_.rows());
  for (size_t id = 0; id < rows; ++id)
    if (!allowed_.test(static_cast<int32_t>(id))) logits[id] = -std::numeric_limits<float>::infinity();
  ++stats_.constrained_tokens;
  stats_.mask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void OutputConstrainer::wrote(int32_t id, const OutputPosition& at) {
  if (!grammars_) return;
  if (call_) {
    if (!call_->accept(id)) ++stats_.refused_forced;
    // The call's value is complete: what follows (the format's closing markup) is the model's.
    if (call_->failed() || call_->accepting()) call_.reset();
    return;
  }
  if (answer_) {
    const bool leaves = std::find(start_ids_.begin(), start_ids_.end(), id) != start_ids_.end() ||
                        std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
    if (leaves) {
      answer_.reset();  // reasoning or a call first: the answer begins again after it
    } else if (!answer_->accept(id)) {
      ++stats_.refused_forced;
      answer_.reset();
      answer_done_ = true;
    } else {
      answer_fed_ = true;
    }
  }
  open_call(at);
  if (call_) {
    answer_.reset();
    answer_done_ = true;  // a turn that calls a tool answers in its next turn
  }
}

void OutputConstrainer::open_call(const OutputPosition& at) {
  if (at.in_reasoning) return;
  // Formats that name the tool before its arguments: the tool's own grammar once they begin.
  if (format_ == toolcall::ToolCallFormat::Harmony || format_ == toolcall::ToolCallFormat::Mistral) {
    const bool harmony = format_ == toolcall::ToolCallFormat::Harmony;
    if (ends_with(at.text, harmony ? "<|message|>" : "[ARGS]")) {
      const auto it = grammars_->arguments.find(harmony ? harmony_recipient(at.text) : mistral_tool_name(at.text));
      if (it != grammars_->arguments.end()) call_.emplace(it->second, *vocabulary_, true);
      return;
    }
    if (harmony) return;
  }
  if (!grammars_->any_call) return;
  const std::string_view marker = call_marker(format_);
  if (format_ != toolcall::ToolCallFormat::Mistral && !marker.empty() && ends_with(at.text, marker)) {
    call_.emplace(grammars_->any_call, *vocabulary_, true);
    return;
  }
  // Calls whose grammar cannot start at their marker, caught once their first bytes are written
  // and fed what came so far: Mistral's [TOOL_CALLS] opens an array of calls or names one tool
  // (NAME[ARGS], above), which its next byte tells; Llama 3 writes a call as a bare object where
  // its answer begins (keel's own opener for a required call, {"name": ", or the model's).
  size_t from = SIZE_MAX;
  std::string_view start;
  if (format_ == toolcall::ToolCallFormat::Mistral) {
    const size_t at_marker = at.text.rfind(marker);
    if (at_marker == std::string_view::npos || at_marker < at.answer_start) return;
    from = at_marker + marker.size();
    start = "[";
  } else if (format_ == toolcall::ToolCallFormat::Llama3Json && at.answer_start <= at.text.size()) {
    from = at.answer_start;
    start = "{\"name\"";
  }
  if (from == SIZE_MAX || late_call_tried_at_ == from) return;
  const std::string_view written = at.text.substr(from);
  const std::string_view value = written.substr(std::min(written.find_first_not_of(" \t\r\n"), written.size()));
  if (value.size() < start.size()) return;
  late_call_tried_at_ = from;
  if (!value.starts_with(start)) return;
  call_.emplace(grammars_->any_call, *vocabulary_, true);
  if (!call_->accept_bytes(written)) call_.reset();
}

OutputConstrainer make_output_constrainer(const ServedModel& model, std::shared_ptr<const OutputGrammars> grammars,
                                          bool reasoning, bool calls_allowed) {
  const toolcall::ToolCallFormat format = model.tool_call_format().format;
  if (!grammars) return OutputConstrainer(nullptr, nullptr, format, {}, {});
  const text::Tokenizer& tok = model.tokenizer();
  std::vector<int32_t> end_ids(model.weights().eos_token_ids.begin(), model.weights().eos_token_ids.end());
  for (std::string_view marker : {"<|return|>", "<|call|>", "<|end|>"})
    if (auto id = tok.token_id(marker); id && toolcall::ends_turn(format, marker)) end_ids.push_back(*id);
  std::vector<int32_t> start_ids;
  auto add_start = [&](std::string_view marker) {
    if (auto id = tok.token_id(marker); id && !marker.empty()) start_ids.push_back(*id);
  };
  if (reasoning)
    for (std::string_view opener : {"<think>", "<|channel>", "[THINK]"}) add_start(opener);
  if (calls_allowed) add_start(call_marker(format));
  return OutputConstrainer(std::move(grammars), &model.vocabulary(), format, std::move(end_ids), std::move(start_ids));
}

}  // namespace keel
