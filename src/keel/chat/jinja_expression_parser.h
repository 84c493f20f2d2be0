#pragma once
// The expression half of the template parser: a cursor over the token stream (peek, next,
// accept, expect, syntax errors with the line) and jinja2's expression grammar with its operator
// precedence, down to literals, filters and tests. It also bounds the nesting depth, so the
// statement parser in jinja_parser.cpp derives from it and counts its blocks in the same budget.
// Internal to chat/: only jinja_parser.cpp and jinja_expression_parser.cpp include it.
// A parser owns its tokens and lives for one parse_template call, on the caller's thread.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "keel/chat/jinja_ast.h"
#include "keel/chat/jinja_lexer.h"

namespace keel::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  // An expression, or a tuple when commas follow (`{{ a, b }}`, `{% set x = 1, 2 %}`).
  ExprPtr parse_tuple(bool with_condexpr);
  // One expression. with_condexpr admits `a if b else c`; as in jinja2, `{% if %}` conditions and
  // `{% for %}` sources are parsed without it.
  ExprPtr parse_expression(bool with_condexpr);
  // The filter after a `|`: its dotted name and any arguments. `input` is null in filter blocks
  // and set blocks (`{% filter f %}`, `{% set x | f %}`).
  ExprPtr parse_filter(ExprPtr input);

 protected:
  // Counts one level of nesting for as long as it lives; past kMaxNesting it is a syntax error.
  class DepthGuard {
   public:
    explicit DepthGuard(ExpressionParser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.syntax_error("template nested too deeply");
    }
    ~DepthGuard() { --p_.depth_; }

   private:
    ExpressionParser& p_;
  };

  const Token& peek(size_t ahead = 0) const {
    size_t i = pos_ + ahead;
    return i < tokens_.size() ? tokens_[i] : tokens_.back();
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).type == Token::Type::Operator && peek(ahead).value == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).type == Token::Type::Name && peek(ahead).value == name;
  }
  bool accept_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  // Raises TemplateSyntaxError: `what`, then the token found instead and its line.
  [[noreturn]] void syntax_error(const std::string& what) const;
  void expect_op(std::string_view op) {
    if (!accept_op(op)) syntax_error("expected '" + std::string(op) + "'");
  }
  std::string expect_name() {
    if (peek().type != Token::Type::Name) syntax_error("expected a name");
    return next().value;
  }

 private:
  // Deep enough for any real template, shallow enough for the default thread stack.
  static constexpr int kMaxNesting = 200;

  bool at_expression_end() const;
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_filter_expr(ExprPtr node);
  std::string dotted_name();
  ExprPtr parse_test(ExprPtr input);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace keel::jinja
