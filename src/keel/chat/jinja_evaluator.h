#pragma once
// Executes a parsed template: statements write to an output buffer, expressions evaluate to
// Values. Scoping follows jinja2: `for`, macros and `with` open a new frame, `if` does not;
// names not found in any frame come from the render context, then the builtin globals.
// Sandbox: no file or environment access exists at all, and loop iterations, output size and
// call depth are bounded by RenderOptions.
// Threads: one Evaluator per render (Template::render makes it on the calling thread); not
// thread-safe. It only reads `context`, `options` and the syntax tree, which must outlive it; `now`
// runs on the rendering thread.
#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "keel/chat/jinja_ast.h"
#include "keel/chat/jinja_value.h"

namespace keel::jinja {

struct RenderOptions {
  size_t max_output_bytes = 32u << 20;
  uint64_t max_loop_iterations = 1'000'000;
  int max_call_depth = 64;
  // Wall-clock time for strftime_now, as a broken-down local time. Unset: the system clock.
  std::function<std::tm()> now;
};

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};
using FramePtr = std::shared_ptr<Frame>;

class Evaluator {
 public:
  Evaluator(const DictData& context, const RenderOptions& options);

  TaggedText render(const Body& body);

  // Used by builtins that take other builtins by name (map, select...) and by macros.
  Value eval(const Expr& e, const FramePtr& frame);
  Value call(const Value& callee, const CallArgs& args, const std::string& what);
  const RenderOptions& options() const { return options_; }
  void count_iterations(uint64_t n);

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, const FramePtr& frame);
  Flow exec_stmt(const Stmt& s, const FramePtr& frame);
  Flow exec_stmt_unlocated(const Stmt& s, const FramePtr& frame);
  void exec_for(const Stmt& s, const FramePtr& frame);
  void exec_set(const Stmt& s, const FramePtr& frame, Value value);
  Value make_macro(const Stmt& s, const FramePtr& frame);
  TaggedText capture(const Body& body, const FramePtr& frame);
  void write(const TaggedText& t);
  Value bounded(Value v) const;

  Value lookup(const std::string& name, const FramePtr& frame) const;
  Value eval_call(const Expr& e, const FramePtr& frame);
  Value eval_binary(const Expr& e, const FramePtr& frame);
  Value eval_compare(const Expr& e, const FramePtr& frame);
  CallArgs eval_args(const Expr& e, size_t first, const FramePtr& frame);

  const DictData& context_;
  const RenderOptions& options_;
  std::unordered_map<std::string, Value> globals_;
  TaggedText* out_ = nullptr;
  uint64_t iterations_ = 0;
  int call_depth_ = 0;
};

// The builtin globals (range, namespace, dict, raise_exception, strftime_now).
void install_globals(std::unordered_map<std::string, Value>& globals, Evaluator& ev);

}  // namespace keel::jinja
