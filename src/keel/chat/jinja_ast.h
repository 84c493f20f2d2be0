#pragma once
// The syntax tree of a parsed template. Nodes are plain structs with a kind tag; the evaluator
// switches on the kind. Expressions and statements are kept apart because only statements
// produce output.
// Nodes own their children (unique_ptr). Built once by the parser, then only read: a Template
// shares its tree with every render, on any number of threads at once.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "keel/chat/jinja_value.h"

namespace keel::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,      // literal
    Name,         // name
    GetAttr,      // args[0].name
    GetItem,      // args[0][args[1]]
    Slice,        // args[0][args[1]:args[2]:args[3]], absent bounds are null
    Call,         // args[0](args[1..], kwargs)
    Filter,       // args[0] | name(args[1..], kwargs); args[0] is null inside filter blocks
    Test,         // args[0] is [not] name(args[1..])
    Not,          // not args[0]
    Negate,       // -args[0]
    Plus,         // +args[0]
    Binary,       // args[0] name args[1]: or and + - * / // % ** ~ in
    Compare,      // args[0] ops[0] args[1] ops[1] args[2] ...
    Conditional,  // args[1] if args[0] else args[2] (args[2] may be null)
    List,         // [args...]
    Tuple,        // (args...)
    Dict,         // {args[0]: args[1], ...}
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// A macro or call-block parameter, with its default value when it has one.
struct Param {
  std::string name;
  ExprPtr default_value;
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches (condition, body), else_body
    For,          // for targets in expr [if condition] body [else else_body]
    Set,          // set targets = expr, or set targets[0].attr = expr
    SetBlock,     // set targets[0] | filters ... endset
    Macro,        // macro name(params) body
    CallBlock,    // call(params) expr body
    FilterBlock,  // filter filters body endfilter
    With,         // with targets = values ... body endwith
    Scope,        // a body rendered in place (generation, block)
    Break,
    Continue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  std::string attr;
  std::vector<ExprPtr> filters;  // Filter expressions whose input is null
  std::vector<ExprPtr> values;   // With
  std::string name;
  std::vector<Param> params;
};

}  // namespace keel::jinja
