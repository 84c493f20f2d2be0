#include "keel/chat/jinja_evaluator.h"

#include <cmath>
#include <ctime>

#include "keel/chat/jinja_args.h"
#include "keel/chat/jinja_builtins.h"
#include "keel/chat/jinja_error.h"
#include "keel/chat/jinja_operators.h"

namespace keel::jinja {

Evaluator::Evaluator(const DictData& context, const RenderOptions& options) : context_(context), options_(options) {
  install_globals(globals_, *this);
}

void Evaluator::count_iterations(uint64_t n) {
  iterations_ += n;
  if (iterations_ > options_.max_loop_iterations)
    fail("SecurityError", "the template ran more than " + std::to_string(options_.max_loop_iterations) + " loop iterations");
}

TaggedText Evaluator::render(const Body& body) {
  auto root = std::make_shared<Frame>();
  return capture(body, root);
}

TaggedText Evaluator::capture(const Body& body, const FramePtr& frame) {
  TaggedText buffer;
  TaggedText* saved = out_;
  out_ = &buffer;
  try {
    exec(body, frame);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

void Evaluator::write(const TaggedText& t) {
  out_->append(t);
  if (out_->size() > options_.max_output_bytes)
    fail("SecurityError", "the template produced more than " + std::to_string(options_.max_output_bytes) + " bytes");
}

Evaluator::Flow Evaluator::exec(const Body& body, const FramePtr& frame) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, frame);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

namespace {

// A runtime error that already names the template line it happened on; outer statements pass it on.
class LocatedError : public keel::Error {
 public:
  using keel::Error::Error;
};

}  // namespace

Evaluator::Flow Evaluator::exec_stmt(const Stmt& s, const FramePtr& frame) {
  try {
    return exec_stmt_unlocated(s, frame);
  } catch (const LocatedError&) {
    throw;
  } catch (const keel::Error& e) {
    throw LocatedError(std::string(e.what()) + " (template line " + std::to_string(s.line) + ")");
  }
}

Evaluator::Flow Evaluator::exec_stmt_unlocated(const Stmt& s, const FramePtr& frame) {
  switch (s.kind) {
    case Stmt::Kind::Text:
      write(TaggedText(s.text));
      return Flow::Normal;
    case Stmt::Kind::Output:
      write(eval(*s.expr, frame).to_text());
      return Flow::Normal;
    case Stmt::Kind::If:
      for (const auto& [cond, body] : s.branches)
        if (eval(*cond, frame).truthy()) return exec(body, frame);
      return exec(s.else_body, frame);
    case Stmt::Kind::For:
      exec_for(s, frame);
      return Flow::Normal;
    case Stmt::Kind::Set:
      exec_set(s, frame, eval(*s.expr, frame));
      return Flow::Normal;
    case Stmt::Kind::SetBlock: {
      Value v = Value::string(capture(s.body, frame));
      for (const auto& f : s.filters) v = bounded(apply_filter(*this, f->name, v, eval_args(*f, 1, frame)));
      exec_set(s, frame, v);
      return Flow::Normal;
    }
    case Stmt::Kind::Macro:
      frame->vars[s.name] = make_macro(s, frame);
      return Flow::Normal;
    case Stmt::Kind::CallBlock: {
      const Expr& call_expr = *s.expr;
      Value callee = eval(*call_expr.args[0], frame);
      CallArgs args = eval_args(call_expr, 1, frame);
      const Stmt* stmt = &s;
      args.named.emplace_back("caller", Value::callable("caller", [this, stmt, frame](CallArgs& a) {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame;
        for (size_t i = 0; i < stmt->params.size(); ++i) {
          const Param& p = stmt->params[i];
          if (i < a.positional.size()) inner->vars[p.name] = a.positional[i];
          else if (p.default_value) inner->vars[p.name] = eval(*p.default_value, frame);
          else inner->vars[p.name] = Value::undefined("'" + p.name + "' is undefined");
        }
        for (const auto& [k, v] : a.named) inner->vars[k] = v;
        return Value::string(capture(stmt->body, inner));
      }));
      write(call(callee, args, "call block").to_text());
      return Flow::Normal;
    }
    case Stmt::Kind::FilterBlock: {
      Value v = Value::string(capture(s.body, frame));
      for (const auto& f : s.filters) v = bounded(apply_filter(*this, f->name, v, eval_args(*f, 1, frame)));
      write(v.to_text());
      return Flow::Normal;
    }
    case Stmt::Kind::With: {
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      for (size_t i = 0; i < s.targets.size(); ++i) inner->vars[s.targets[i]] = eval(*s.values[i], frame);
      return exec(s.body, inner);
    }
    case Stmt::Kind::Scope:
      return exec(s.body, frame);
    case Stmt::Kind::Break:
      return Flow::Break;
    case Stmt::Kind::Continue:
      return Flow::Continue;
  }
  return Flow::Normal;
}

void Evaluator::exec_set(const Stmt& s, const FramePtr& frame, Value value) {
  if (!s.attr.empty()) {
    Value target = lookup(s.targets[0], frame);
    if (!target.is_namespace()) fail("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
    target.mutable_namespace().set(s.attr, std::move(value));
    return;
  }
  if (s.targets.size() == 1) {
    frame->vars[s.targets[0]] = std::move(value);
    return;
  }
  std::vector<Value> items = value.iterate();
  if (items.size() != s.targets.size())
    fail("ValueError", "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(s.targets.size()) + " names");
  for (size_t i = 0; i < items.size(); ++i) frame->vars[s.targets[i]] = items[i];
}

void Evaluator::exec_for(const Stmt& s, const FramePtr& frame) {
  Value iterable = eval(*s.expr, frame);
  if (iterable.is_none()) fail("TypeError", "'NoneType' object is not iterable");
  std::vector<Value> items = iterable.iterate();
  auto loop_frame = std::make_shared<Frame>();
  loop_frame->parent = frame;
  auto bind = [&](const Value& item) {
    if (s.targets.size() == 1) {
      loop_frame->vars[s.targets[0]] = item;
      return;
    }
    std::vector<Value> parts = item.iterate();
    if (parts.size() != s.targets.size())
      fail("ValueError", "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(s.targets.size()) + " loop variables");
    for (size_t i = 0; i < parts.size(); ++i) loop_frame->vars[s.targets[i]] = parts[i];
  };
  if (s.condition) {
    std::vector<Value> kept;
    for (const auto& item : items) {
      count_iterations(1);
      bind(item);
      if (eval(*s.condition, loop_frame).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec(s.else_body, frame);
    return;
  }
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    count_iterations(1);
    bind(items[i]);
    auto loop = std::make_shared<DictData>();
    loop->set("index0", Value::integer(static_cast<int64_t>(i)));
    loop->set("index", Value::integer(static_cast<int64_t>(i + 1)));
    loop->set("revindex0", Value::integer(static_cast<int64_t>(n - i - 1)));
    loop->set("revindex", Value::integer(static_cast<int64_t>(n - i)));
    loop->set("first", Value::boolean(i == 0));
    loop->set("last", Value::boolean(i + 1 == n));
    loop->set("length", Value::integer(static_cast<int64_t>(n)));
    loop->set("depth", Value::integer(1));
    loop->set("depth0", Value::integer(0));
    if (i > 0) loop->set("previtem", items[i - 1]);
    if (i + 1 < n) loop->set("nextitem", items[i + 1]);
    loop->set("cycle", Value::callable("cycle", [i](CallArgs& a) {
      if (a.positional.empty()) fail("TypeError", "no items for cycling given");
      return a.positional[i % a.positional.size()];
    }));
    loop_frame->vars["loop"] = Value::dict(loop);
    Flow f = exec(s.body, loop_frame);
    if (f == Flow::Break) break;
  }
}

Value Evaluator::make_macro(const Stmt& s, const FramePtr& frame) {
  const Stmt* stmt = &s;
  // The macro is stored in the frame it captures; a weak reference avoids a cycle that would
  // keep every frame alive after rendering.
  std::weak_ptr<Frame> weak_frame = frame;
  return Value::callable(s.name, [this, stmt, weak_frame](CallArgs& a) {
    FramePtr frame = weak_frame.lock();
    if (!frame) fail("TemplateRuntimeError", "macro '" + stmt->name + "' called after its scope ended");
    if (++call_depth_ > options_.max_call_depth) {
      --call_depth_;
      fail("SecurityError", "macro calls nested more than " + std::to_string(options_.max_call_depth) + " deep");
    }
    struct DepthRelease {
      int& d;
      ~DepthRelease() { --d; }
    } release{call_depth_};
    auto inner = std::make_shared<Frame>();
    inner->parent = frame;
    std::vector<Value> extra;
    for (size_t i = 0; i < a.positional.size(); ++i) {
      if (i < stmt->params.size()) inner->vars[stmt->params[i].name] = a.positional[i];
      else extra.push_back(a.positional[i]);
    }
    auto extra_named = std::make_shared<DictData>();
    for (const auto& [k, v] : a.named) {
      bool is_param = false;
      for (const auto& p : stmt->params) is_param |= p.name == k;
      if (is_param || k == "caller") inner->vars[k] = v;
      else extra_named->set(k, v);
    }
    for (const auto& p : stmt->params) {
      if (inner->vars.count(p.name)) continue;
      inner->vars[p.name] = p.default_value ? eval(*p.default_value, inner)
                                            : Value::undefined("parameter '" + p.name + "' was not provided");
    }
    inner->vars["varargs"] = Value::list(std::move(extra));
    inner->vars["kwargs"] = Value::dict(extra_named);
    return Value::string(capture(stmt->body, inner));
  });
}

Value Evaluator::lookup(const std::string& name, const FramePtr& frame) const {
  for (const Frame* f = frame.get(); f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  if (const Value* v = context_.find(name)) return *v;
  auto it = globals_.find(name);
  if (it != globals_.end()) return it->second;
  return Value::undefined("'" + name + "' is undefined");
}

CallArgs Evaluator::eval_args(const Expr& e, size_t first, const FramePtr& frame) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], frame));
  for (const auto& [k, v] : e.kwargs) args.named.emplace_back(k, eval(*v, frame));
  return args;
}

Value Evaluator::call(const Value& callee, const CallArgs& args, const std::string& what) {
  if (callee.is_undefined()) raise_undefined(callee);
  if (!callee.is_callable()) {
    std::string message = "'";
    message += callee.type_name();
    message += "' object is not callable (" + what + ")";
    fail("TypeError", message);
  }
  CallArgs copy = args;
  return callee.as_callable().call(copy);
}

Value Evaluator::eval_call(const Expr& e, const FramePtr& frame) {
  const Expr& callee = *e.args[0];
  if (callee.kind == Expr::Kind::GetAttr) {
    Value obj = eval(*callee.args[0], frame);
    if (!obj.is_undefined() && !obj.is_namespace() && !(obj.is_dict() && !has_method(obj, callee.name))) {
      CallArgs args = eval_args(e, 1, frame);
      bool found = false;
      Value result = call_method(obj, callee.name, args, found);
      if (found) return result;
    }
    Value fn = get_attribute(obj, callee.name);
    return call(fn, eval_args(e, 1, frame), callee.name);
  }
  Value fn = eval(callee, frame);
  std::string what = callee.kind == Expr::Kind::Name ? callee.name : "expression";
  return call(fn, eval_args(e, 1, frame), what);
}

Value Evaluator::eval_binary(const Expr& e, const FramePtr& frame) {
  const std::string& op = e.name;
  if (op == "and") {
    Value l = eval(*e.args[0], frame);
    return l.truthy() ? eval(*e.args[1], frame) : l;
  }
  if (op == "or") {
    Value l = eval(*e.args[0], frame);
    return l.truthy() ? l : eval(*e.args[1], frame);
  }
  Value l = eval(*e.args[0], frame);
  Value r = eval(*e.args[1], frame);
  if (op == "~") {
    TaggedText t = l.to_text();
    t.append(r.to_text());
    return Value::string(std::move(t));
  }
  return arithmetic(op, l, r);
}

Value Evaluator::eval_compare(const Expr& e, const FramePtr& frame) {
  Value left = eval(*e.args[0], frame);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1], frame);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==") ok = values_equal(left, right);
    else if (op == "!=") ok = !values_equal(left, right);
    else if (op == "<") ok = values_less(left, right);
    else if (op == ">") ok = values_less(right, left);
    else if (op == "<=") ok = !values_less(right, left);
    else if (op == ">=") ok = !values_less(left, right);
    else if (op == "in") ok = value_contains(right, left);
    else ok = !value_contains(right, left);
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Evaluator::bounded(Value v) const {
  // Doubling a string or list in a loop grows exponentially; stop it long before memory runs out.
  if (v.is_string() && v.as_string().size() > options_.max_output_bytes)
    fail("SecurityError", "a string grew past " + std::to_string(options_.max_output_bytes) + " bytes");
  if (v.is_list() && v.as_list().size() > options_.max_loop_iterations)
    fail("SecurityError", "a list grew past " + std::to_string(options_.max_loop_iterations) + " items");
  return v;
}

Value Evaluator::eval(const Expr& e, const FramePtr& frame) {
  switch (e.kind) {
    case Expr::Kind::Literal:
      return e.literal;
    case Expr::Kind::Name:
      return lookup(e.name, frame);
    case Expr::Kind::GetAttr:
      return get_attribute(eval(*e.args[0], frame), e.name);
    case Expr::Kind::GetItem:
      return get_item(eval(*e.args[0], frame), eval(*e.args[1], frame));
    case Expr::Kind::Slice: {
      Value obj = eval(*e.args[0], frame);
      Value b = e.args[1] ? eval(*e.args[1], frame) : Value::none();
      Value s = e.args[2] ? eval(*e.args[2], frame) : Value::none();
      Value st = e.args[3] ? eval(*e.args[3], frame) : Value::none();
      return slice_value(obj, b, s, st);
    }
    case Expr::Kind::Call:
      return bounded(eval_call(e, frame));
    case Expr::Kind::Filter:
      return bounded(apply_filter(*this, e.name, eval(*e.args[0], frame), eval_args(e, 1, frame)));
    case Expr::Kind::Test: {
      bool r = apply_test(*this, e.name, eval(*e.args[0], frame), eval_args(e, 1, frame));
      return Value::boolean(e.negated ? !r : r);
    }
    case Expr::Kind::Not:
      return Value::boolean(!eval(*e.args[0], frame).truthy());
    case Expr::Kind::Negate: {
      Value v = eval(*e.args[0], frame);
      if (v.is_undefined()) raise_undefined(v);
      if (v.is_float()) return Value::number(-v.as_double(), v.tag());
      if (v.is_int() || v.is_bool()) return Value::integer(-v.as_int(), v.tag());
      fail("TypeError", "bad operand type for unary -: '" + v.type_name() + "'");
    }
    case Expr::Kind::Plus: {
      Value v = eval(*e.args[0], frame);
      if (v.is_undefined()) raise_undefined(v);
      if (!v.is_number()) fail("TypeError", "bad operand type for unary +: '" + v.type_name() + "'");
      return v;
    }
    case Expr::Kind::Binary:
      return bounded(eval_binary(e, frame));
    case Expr::Kind::Compare:
      return eval_compare(e, frame);
    case Expr::Kind::Conditional:
      if (eval(*e.args[0], frame).truthy()) return eval(*e.args[1], frame);
      return e.args[2] ? eval(*e.args[2], frame) : Value::undefined("the conditional expression had no else branch");
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      std::vector<Value> items;
      for (const auto& a : e.args) items.push_back(eval(*a, frame));
      return Value::list(std::move(items), kNoTag, e.kind == Expr::Kind::Tuple);
    }
    case Expr::Kind::Dict: {
      auto d = std::make_shared<DictData>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i], frame);
        d->set(k, eval(*e.args[i + 1], frame));
      }
      return Value::dict(d);
    }
  }
  return Value();
}

}  // namespace keel::jinja
