#include "keel/chat/jinja_parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "keel/chat/jinja_error.h"
#include "keel/chat/jinja_lexer.h"

namespace keel::jinja {
namespace {

// Deep enough for any real template, shallow enough for the default thread stack.
constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_all() {
    Body body = parse_body({}, nullptr);
    if (peek().type != Token::Type::End) syntax_error("unexpected token");
    return body;
  }

 private:
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.syntax_error("template nested too deeply");
    }
    ~DepthGuard() { --p_.depth_; }

   private:
    Parser& p_;
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

  [[noreturn]] void syntax_error(const std::string& what) const {
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
  void expect_op(std::string_view op) {
    if (!accept_op(op)) syntax_error("expected '" + std::string(op) + "'");
  }
  std::string expect_name() {
    if (peek().type != Token::Type::Name) syntax_error("expected a name");
    return next().value;
  }
  void expect_block_end() {
    if (peek().type != Token::Type::BlockEnd) syntax_error("expected end of statement block");
    next();
  }

  // --- statements -------------------------------------------------------------------------

  // Parses until a block tag named in `ends`; consumes `{%` and that name and reports it.
  Body parse_body(std::initializer_list<std::string_view> ends, std::string* which) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == Token::Type::End) {
        if (ends.size() == 0) return body;
        std::string expected;
        for (auto e : ends) expected += (expected.empty() ? "'" : " or '") + std::string(e) + "'";
        syntax_error("unexpected end of template, expected " + expected);
      }
      if (t.type == Token::Type::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = t.line;
        s->text = next().value;
        body.push_back(std::move(s));
      } else if (t.type == Token::Type::VariableBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->line = next().line;
        s->expr = parse_tuple(true);
        if (peek().type != Token::Type::VariableEnd) syntax_error("expected end of print statement");
        next();
        body.push_back(std::move(s));
      } else if (t.type == Token::Type::BlockBegin) {
        if (peek(1).type == Token::Type::Name) {
          for (auto e : ends) {
            if (peek(1).value == e) {
              next();
              *which = next().value;
              return body;
            }
          }
        }
        next();
        body.push_back(parse_statement());
      } else {
        syntax_error("unexpected token");
      }
    }
  }

  StmtPtr parse_statement() {
    if (peek().type != Token::Type::Name) syntax_error("expected a statement name");
    const Token& tag = next();
    auto s = std::make_unique<Stmt>();
    s->line = tag.line;
    const std::string& name = tag.value;
    std::string which;
    if (name == "if") {
      s->kind = Stmt::Kind::If;
      ExprPtr cond = parse_expression(false);
      expect_block_end();
      Body body = parse_body({"elif", "else", "endif"}, &which);
      s->branches.emplace_back(std::move(cond), std::move(body));
      while (which == "elif") {
        cond = parse_expression(false);
        expect_block_end();
        body = parse_body({"elif", "else", "endif"}, &which);
        s->branches.emplace_back(std::move(cond), std::move(body));
      }
      if (which == "else") {
        expect_block_end();
        s->else_body = parse_body({"endif"}, &which);
      }
      expect_block_end();
    } else if (name == "for") {
      s->kind = Stmt::Kind::For;
      s->targets = parse_target_names();
      if (!accept_name("in")) syntax_error("expected 'in'");
      s->expr = parse_tuple(false);
      if (accept_name("if")) s->condition = parse_expression(true);
      if (at_name("recursive"))
        fail("TemplateSyntaxError", "recursive loops are not supported (line " + std::to_string(tag.line) + ")");
      expect_block_end();
      ++loop_depth_;
      s->body = parse_body({"else", "endfor"}, &which);
      --loop_depth_;
      if (which == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, &which);
      }
      expect_block_end();
    } else if (name == "set") {
      s->targets.push_back(expect_name());
      if (accept_op(".")) {
        s->attr = expect_name();
      } else {
        while (accept_op(",")) s->targets.push_back(expect_name());
      }
      if (accept_op("=")) {
        s->kind = Stmt::Kind::Set;
        s->expr = parse_tuple(true);
        expect_block_end();
      } else {
        if (s->targets.size() != 1 || !s->attr.empty()) syntax_error("expected '='");
        s->kind = Stmt::Kind::SetBlock;
        while (accept_op("|")) s->filters.push_back(parse_filter(nullptr));
        expect_block_end();
        s->body = parse_body({"endset"}, &which);
        expect_block_end();
      }
    } else if (name == "macro") {
      s->kind = Stmt::Kind::Macro;
      s->name = expect_name();
      s->params = parse_params();
      expect_block_end();
      int saved = loop_depth_;
      loop_depth_ = 0;
      s->body = parse_body({"endmacro"}, &which);
      loop_depth_ = saved;
      if (peek().type == Token::Type::Name) next();
      expect_block_end();
    } else if (name == "call") {
      s->kind = Stmt::Kind::CallBlock;
      if (at_op("(")) s->params = parse_params();
      s->expr = parse_expression(true);
      if (s->expr->kind != Expr::Kind::Call) syntax_error("expected a call");
      expect_block_end();
      int saved = loop_depth_;
      loop_depth_ = 0;
      s->body = parse_body({"endcall"}, &which);
      loop_depth_ = saved;
      expect_block_end();
    } else if (name == "filter") {
      s->kind = Stmt::Kind::FilterBlock;
      s->filters.push_back(parse_filter(nullptr));
      while (accept_op("|")) s->filters.push_back(parse_filter(nullptr));
      expect_block_end();
      s->body = parse_body({"endfilter"}, &which);
      expect_block_end();
    } else if (name == "with") {
      s->kind = Stmt::Kind::With;
      while (peek().type != Token::Type::BlockEnd) {
        if (!s->targets.empty()) expect_op(",");
        s->targets.push_back(expect_name());
        expect_op("=");
        s->values.push_back(parse_expression(true));
      }
      expect_block_end();
      s->body = parse_body({"endwith"}, &which);
      expect_block_end();
    } else if (name == "generation" || name == "block") {
      // generation is transformers' marker for assistant tokens; block without extends renders in place.
      s->kind = Stmt::Kind::Scope;
      if (name == "block") s->name = expect_name();
      expect_block_end();
      if (name == "block") {
        s->body = parse_body({"endblock"}, &which);
        if (peek().type == Token::Type::Name) next();
      } else {
        s->body = parse_body({"endgeneration"}, &which);
      }
      expect_block_end();
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) syntax_error("'" + name + "' outside of a loop");
      s->kind = name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect_block_end();
    } else if (name == "include" || name == "import" || name == "from" || name == "extends") {
      fail("TemplateError", "'" + name + "' is not available: chat templates cannot load other templates (line " +
                                std::to_string(tag.line) + ")");
    } else {
      fail("TemplateSyntaxError", "Encountered unknown tag '" + name + "' (line " + std::to_string(tag.line) + ")");
    }
    return s;
  }

  std::vector<std::string> parse_target_names() {
    std::vector<std::string> names;
    bool paren = accept_op("(");
    names.push_back(expect_name());
    while (accept_op(",")) {
      if (paren && at_op(")")) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  std::vector<Param> parse_params() {
    std::vector<Param> params;
    expect_op("(");
    while (!at_op(")")) {
      if (!params.empty()) expect_op(",");
      Param p;
      p.name = expect_name();
      if (accept_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    expect_op(")");
    return params;
  }

  // --- expressions ------------------------------------------------------------------------

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  bool at_expression_end() const {
    const Token& t = peek();
    return t.type == Token::Type::VariableEnd || t.type == Token::Type::BlockEnd || t.type == Token::Type::End ||
           at_op(")") || at_op("]") || at_op("}") || at_op("=");
  }

  // An expression, or a tuple when commas follow (`{{ a, b }}`, `{% set x = 1, 2 %}`).
  ExprPtr parse_tuple(bool with_condexpr) {
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

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
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

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    auto e = make(Expr::Kind::Binary, line);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      int line = next().line;
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      int line = next().line;
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      DepthGuard guard(*this);
      auto e = make(Expr::Kind::Not, next().line);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& t = next();
      std::string op = t.value;
      left = binary(op, std::move(left), parse_concat(), t.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (at_op("~")) {
      int line = next().line;
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& t = next();
      std::string op = t.value;
      left = binary(op, std::move(left), parse_pow(), t.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (at_op("**")) {
      int line = next().line;
      left = binary("**", std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_postfix(ExprPtr node) {
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

  ExprPtr parse_subscript(ExprPtr node) {
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
  void parse_call_args(Expr& e) {
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

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(Expr::Kind::Call, peek().line);
    e->args.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
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

  std::string dotted_name() {
    std::string name = expect_name();
    while (at_op(".") && peek(1).type == Token::Type::Name) {
      next();
      name += "." + next().value;
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr input) {
    auto e = make(Expr::Kind::Filter, peek().line);
    e->name = dotted_name();
    e->args.push_back(std::move(input));
    if (at_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr input) {
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

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize_template(source)).parse_all(); }

}  // namespace keel::jinja
