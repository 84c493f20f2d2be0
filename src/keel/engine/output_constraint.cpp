#include "keel/engine/output_constraint.h"

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
    case toolcall::ToolCallFormat::Hermes: return "<tool_call>";
    case toolcall::ToolCallFormat::Llama3Json: return "<|python_tag|>";
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
  const bool json_call = format == ToolCallFormat::Hermes || format == ToolCallFormat::Llama3Json;
  if (!json_call && format != ToolCallFormat::Harmony) return;
  // A tool's arguments node in `grammar`: its schema, or any object when it is not constrained.
  auto arguments = [&](Grammar& grammar, const std::string& name, const Json& function) {
    const Json schema = function.contains("parameters") && !function["parameters"].is_null()
                            ? function["parameters"]
                            : Json{{"type", "object"}, {"properties", Json::object()}};
    if (include(name)) {
      try {
        return constrain::add_json_schema(grammar, schema, "tools." + name + ".parameters",
                                          constrain::UndeclaredKeys::Closed);
      } catch (const constrain::SchemaError&) {
        out.unconstrained_tools.push_back(name);
      }
    }
    return constrain::add_json_schema(grammar, Json{{"type", "object"}}, "");
  };
  Grammar calls;
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
    } else {
      Grammar one;
      const uint32_t args = arguments(one, name, function);
      out.arguments[name] = finish(std::move(one), args);
    }
  }
  if (!any_included) {
    out.arguments.clear();
    return;
  }
  if (json_call && !alternatives.empty()) {
    constrain::GrammarNode choice;
    choice.kind = constrain::NodeKind::Choice;
    choice.children = std::move(alternatives);
    const uint32_t node = calls.add(std::move(choice));
    out.any_call = finish(std::move(calls), node);
  }
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
  if (format_ == toolcall::ToolCallFormat::Harmony) {
    if (!ends_with(at.text, "<|message|>")) return;
    const auto it = grammars_->arguments.find(harmony_recipient(at.text));
    if (it != grammars_->arguments.end()) call_.emplace(it->second, *vocabulary_, true);
    return;
  }
  if (!grammars_->any_call) return;
  const std::string_view marker = call_marker(format_);
  if (!marker.empty() && ends_with(at.text, marker)) {
    call_.emplace(grammars_->any_call, *vocabulary_, true);
    return;
  }
  // Llama 3 also writes a call as a bare object where its answer begins: keel's own opener for a
  // required call ({"name": "), or the model's. Caught once the answer starts so.
  if (format_ == toolcall::ToolCallFormat::Llama3Json && at.answer_start <= at.text.size() &&
      bare_call_tried_at_ != at.answer_start) {
    std::string_view answer = at.text.substr(at.answer_start);
    answer.remove_prefix(std::min(answer.find_first_not_of(" \t\r\n"), answer.size()));
    if (answer.starts_with("{\"name\"")) {
      bare_call_tried_at_ = at.answer_start;
      call_.emplace(grammars_->any_call, *vocabulary_, true);
      if (!call_->accept_bytes(answer)) call_.reset();
    }
  }
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
