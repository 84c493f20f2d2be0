#include "keel/chat/jinja_template.h"

#include "keel/chat/jinja_builtins.h"
#include "keel/chat/jinja_error.h"
#include "keel/chat/jinja_parser.h"

namespace keel::jinja {
namespace {

// jinja2 resolves filter and test names when it compiles a template, so an unknown name fails
// every render, even when the branch that uses it never runs.
void check_names(const Expr* e) {
  if (!e) return;
  if (e->kind == Expr::Kind::Filter && !filter_exists(e->name))
    fail("TemplateAssertionError", "No filter named '" + e->name + "' (line " + std::to_string(e->line) + ")");
  if (e->kind == Expr::Kind::Test && !test_exists(e->name))
    fail("TemplateAssertionError", "No test named '" + e->name + "' (line " + std::to_string(e->line) + ")");
  for (const auto& a : e->args) check_names(a.get());
  for (const auto& kv : e->kwargs) check_names(kv.second.get());
}

void check_names(const Body& body) {
  for (const auto& s : body) {
    check_names(s->expr.get());
    check_names(s->condition.get());
    for (const auto& [cond, b] : s->branches) {
      check_names(cond.get());
      check_names(b);
    }
    check_names(s->body);
    check_names(s->else_body);
    for (const auto& f : s->filters) check_names(f.get());
    for (const auto& v : s->values) check_names(v.get());
    for (const auto& p : s->params) check_names(p.default_value.get());
  }
}

}  // namespace

Template::Template(std::string_view source) {
  auto body = std::make_shared<Body>(parse_template(source));
  check_names(*body);
  body_ = std::move(body);
}

TaggedText Template::render(const DictData& context, const RenderOptions& options) const {
  Evaluator ev(context, options);
  return ev.render(*body_);
}

namespace {

Value value_from_json_at(const nlohmann::ordered_json& j, Tag tag, int depth);

}  // namespace

Value value_from_json(const nlohmann::ordered_json& j, Tag tag) { return value_from_json_at(j, tag, 0); }

namespace {

Value value_from_json_at(const nlohmann::ordered_json& j, Tag tag, int depth) {
  if (depth > kMaxValueNesting) fail("ValueError", "JSON nested more than " + std::to_string(kMaxValueNesting) + " deep");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none(tag);
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>(), tag);
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>(), tag);
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u), tag);
      return Value::integer(static_cast<int64_t>(u), tag);
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(j.get<double>(), tag);
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>(), tag);
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(value_from_json_at(x, tag, depth + 1));
      return Value::list(std::move(items), tag);
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<DictData>();
      for (const auto& [k, v] : j.items()) d->set(k, value_from_json_at(v, tag, depth + 1));
      return Value::dict(d, tag);
    }
    default:
      fail("TypeError", "unsupported JSON value");
  }
}

}  // namespace

}  // namespace keel::jinja
