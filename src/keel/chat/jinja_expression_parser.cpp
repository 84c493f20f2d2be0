#include "keel/chat/jinja_expression_parser.h"

#include <charconv>
#include <cstdlib>

#include "keel/chat/jinja_error.h"

namespace keel::jinja {
namespace {

ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
  auto e = make(Expr::Kind::Binary, line);
  e->name = std::move(op);
  e->args.push_back(std::move(left));
  e->args.push_back(std::move(right));
  return e;
}

}  // namespace

// --- token cursor ---------------------------------------------------------------------------

void ExpressionParser::syntax_error(const std::string& what) const {
  const Token& t = peek();
  std::string found;
  switch (t.type) {
    case Token::Type::End: found = "end of template"; break;
    case Token::Type::BlockEnd: found = "end of statement block"; break;
    case Token::Type::VariableEnd: found = "end of print statement"; break;
    case Token::Type::Text: found = "template text"; break;
    default: found = "'" + t.value + "'";
  }
  fail("TemplateSyntaxError", what + " (found " + found + ", line " + std::to_string(t.line) + ")");
}

// --- expressions ----------------------------------------------------------------------------

bool ExpressionParser::at_expression_end() const {
  const Token& t = peek();
  return t.type == Token::Type::VariableEnd || t.type == Token::Type::BlockEnd || t.type == Token::Type::End ||
         at_op(")") || at_op("]") || at_op("}") || at_op("=");
}

ExprPtr ExpressionParser::parse_tuple(bool with_condexpr) {
  int line = peek().line;
  ExprPtr first = parse_expression(with_condexpr);
  if (!at_op(",")) return first;
  auto tuple = make(Expr::Kind::Tuple, line);
  tuple->args.push_back(std::move(first));
  while (accept_op(",")) {
    if (at_expression_end()) break;
    tuple->args.push_back(parse_expression(with_condexpr));
  }
  return tuple;
}

ExprPtr ExpressionParser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExpressionParser::parse_condexpr() {
  ExprPtr expr = parse_or();
  while (at_name("if")) {
    int line = next().line;
    auto cond = make(Expr::Kind::Conditional, line);
    cond->args.push_back(parse_or());
    cond->args.push_back(std::move(expr));
    cond->args.push_back(accept_name("else") ? parse_condexpr() : nullptr);
    expr = std::move(cond);
  }
  return expr;
}

ExprPtr ExpressionParser::parse_or() {
  ExprPtr left = parse_and();
  while (at_name("or")) {
    int line = next().line;
    left = binary("or", std::move(left), parse_and(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_and() {
  ExprPtr left = parse_not();
  while (at_name("and")) {
    int line = next().line;
    left = binary("and", std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_not() {
  if (at_name("not")) {
    DepthGuard guard(*this);
    auto e = make(Expr::Kind::Not, next().line);
    e->args.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  int line = peek().line;
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (peek().type == Token::Type::Operator &&
        (peek().value == "==" || peek().value == "!=" || peek().value == "<" || peek().value == "<=" ||
         peek().value == ">" || peek().value == ">=")) {
      op = next().value;
    } else if (at_name("in")) {
      next();
      op = "in";
    } else if (at_name("not") && at_name("in", 1)) {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(Expr::Kind::Compare, line);
      cmp->args.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr ExpressionParser::parse_math1() {
  ExprPtr left = parse_concat();
  while (at_op("+") || at_op("-")) {
    const Token& t = next();
    std::string op = t.value;
    left = binary(op, std::move(left), parse_concat(), t.line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_concat() {
  ExprPtr left = parse_math2();
  while (at_op("~")) {
    int line = next().line;
    left = binary("~", std::move(left), parse_math2(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_math2() {
  ExprPtr left = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const Token& t = next();
    std::string op = t.value;
    left = binary(op, std::move(left), parse_pow(), t.line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (at_op("**")) {
    int line = next().line;
    left = binary("**", std::move(left), parse_unary(true), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    const Token& t = next();
    node = make(t.value == "-" ? Expr::Kind::Negate : Expr::Kind::Plus, t.line);
    node->args.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr ExpressionParser::parse_primary() {
  DepthGuard guard(*this);
  const Token& t = peek();
  int line = t.line;
  switch (t.type) {
    case Token::Type::Name: {
      std::string name = next().value;
      auto e = make(Expr::Kind::Literal, line);
      if (name == "true" || name == "True") {
        e->literal = Value::boolean(true);
      } else if (name == "false" || name == "False") {
        e->literal = Value::boolean(false);
      } else if (name == "none" || name == "None") {
        e->literal = Value::none();
      } else {
        e->kind = Expr::Kind::Name;
        e->name = name;
      }
      return e;
    }
    case Token::Type::String: {
      std::string s = next().value;
      while (peek().type == Token::Type::String) s += next().value;  // adjacent literals join
      auto e = make(Expr::Kind::Literal, line);
      e->literal = Value::string(std::move(s));
      return e;
    }
    case Token::Type::Integer: {
      std::string digits = next().value;
      int64_t v = 0;
      auto res = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (res.ec != std::errc()) fail("TemplateSyntaxError", "integer literal out of range (line " + std::to_string(line) + ")");
      auto e = make(Expr::Kind::Literal, line);
      e->literal = Value::integer(v);
      return e;
    }
    case Token::Type::Float: {
      std::string digits = next().value;
      auto e = make(Expr::Kind::Literal, line);
      e->literal = Value::number(std::strtod(digits.c_str(), nullptr));
      return e;
    }
    case Token::Type::Operator:
      if (accept_op("(")) {
        if (accept_op(")")) return make(Expr::Kind::Tuple, line);
        ExprPtr first = parse_expression(true);
        if (accept_op(")")) return first;
        auto tuple = make(Expr::Kind::Tuple, line);
        tuple->args.push_back(std::move(first));
        while (accept_op(",")) {
          if (at_op(")")) break;
          tuple->args.push_back(parse_expression(true));
        }
        expect_op(")");
        return tuple;
      }
      if (accept_op("[")) {
        auto list = make(Expr::Kind::List, line);
        while (!at_op("]")) {
          if (!list->args.empty()) expect_op(",");
          if (at_op("]")) break;
          list->args.push_back(parse_expression(true));
        }
        expect_op("]");
        return list;
      }
      if (accept_op("{")) {
        auto dict = make(Expr::Kind::Dict, line);
        while (!at_op("}")) {
          if (!dict->args.empty()) expect_op(",");
          if (at_op("}")) break;
          dict->args.push_back(parse_expression(true));
          expect_op(":");
          dict->args.push_back(parse_expression(true));
        }
        expect_op("}");
        return dict;
      }
      break;
    default:
      break;
  }
  syntax_error("unexpected token in expression");
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".")) {
      int line = next().line;
      if (peek().type == Token::Type::Integer) {
        auto e = make(Expr::Kind::GetItem, line);
        e->args.push_back(std::move(node));
        auto index = make(Expr::Kind::Literal, line);
        index->literal = Value::integer(std::strtoll(next().value.c_str(), nullptr, 10));
        e->args.push_back(std::move(index));
        node = std::move(e);
      } else {
        auto e = make(Expr::Kind::GetAttr, line);
        e->name = expect_name();
        e->args.push_back(std::move(node));
        node = std::move(e);
      }
    } else if (at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr node) {
  int line = next().line;  // [
  ExprPtr start, stop, step;
  if (!at_op(":")) start = parse_expression(true);
  if (!accept_op(":")) {
    expect_op("]");
    auto e = make(Expr::Kind::GetItem, line);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(start));
    return e;
  }
  if (!at_op("]") && !at_op(":")) stop = parse_expression(true);
  if (accept_op(":") && !at_op("]")) step = parse_expression(true);
  expect_op("]");
  auto e = make(Expr::Kind::Slice, line);
  e->args.push_back(std::move(node));
  e->args.push_back(std::move(start));
  e->args.push_back(std::move(stop));
  e->args.push_back(std::move(step));
  return e;
}

// Arguments in parentheses, appended to e->args / e->kwargs.
void ExpressionParser::parse_call_args(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!at_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (at_op(")")) break;
    if (at_op("*") || at_op("**")) syntax_error("*args and **kwargs are not supported");
    if (peek().type == Token::Type::Name && at_op("=", 1)) {
      std::string key = next().value;
      next();
      e.kwargs.emplace_back(key, parse_expression(true));
    } else {
      if (!e.kwargs.empty()) syntax_error("positional argument after keyword argument");
      e.args.push_back(parse_expression(true));
    }
  }
  expect_op(")");
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
  auto e = make(Expr::Kind::Call, peek().line);
  e->args.push_back(std::move(callee));
  parse_call_args(*e);
  return e;
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (accept_op("|")) {
      node = parse_filter(std::move(node));
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

std::string ExpressionParser::dotted_name() {
  std::string name = expect_name();
  while (at_op(".") && peek(1).type == Token::Type::Name) {
    next();
    name += "." + next().value;
  }
  return name;
}

ExprPtr ExpressionParser::parse_filter(ExprPtr input) {
  auto e = make(Expr::Kind::Filter, peek().line);
  e->name = dotted_name();
  e->args.push_back(std::move(input));
  if (at_op("(")) parse_call_args(*e);
  return e;
}

ExprPtr ExpressionParser::parse_test(ExprPtr input) {
  auto e = make(Expr::Kind::Test, next().line);  // is
  e->negated = accept_name("not");
  e->name = dotted_name();
  e->args.push_back(std::move(input));
  if (at_op("(")) {
    parse_call_args(*e);
  } else {
    const Token& t = peek();
    bool starts_primary = t.type == Token::Type::Name || t.type == Token::Type::String ||
                          t.type == Token::Type::Integer || t.type == Token::Type::Float || at_op("(") ||
                          at_op("[") || at_op("{");
    if (starts_primary && !at_name("else") && !at_name("or") && !at_name("and")) {
      if (at_name("is")) syntax_error("unexpected 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
  }
  return e;
}

}  // namespace keel::jinja
