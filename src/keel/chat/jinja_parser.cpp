#include "keel/chat/jinja_parser.h"

#include <initializer_list>

#include "keel/chat/jinja_error.h"
#include "keel/chat/jinja_expression_parser.h"
#include "keel/chat/jinja_lexer.h"

namespace keel::jinja {
namespace {

// The statement half of the parser: block tags and their bodies. Expressions, the token cursor
// and the nesting bound come from ExpressionParser.
class StatementParser : private ExpressionParser {
 public:
  explicit StatementParser(std::vector<Token> tokens) : ExpressionParser(std::move(tokens)) {}

  Body parse_all() {
    Body body = parse_body({}, nullptr);
    if (peek().type != Token::Type::End) syntax_error("unexpected token");
    return body;
  }

 private:
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

  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return StatementParser(tokenize_template(source)).parse_all(); }

}  // namespace keel::jinja
