#pragma once
// Public entry point of the Jinja interpreter: parse once, render many times.
//
//   keel::jinja::Template t(source);            // throws keel::Error on a malformed template
//   keel::jinja::TaggedText out = t.render(context, options);
//
// Rendering follows Hugging Face's chat-template environment (jinja2 ImmutableSandboxedEnvironment
// with trim_blocks, lstrip_blocks and loop controls; tojson, raise_exception and strftime_now).
//
// Threads: immutable after construction. render() is const and keeps its state in a per-call
// Evaluator, so many threads may render one Template at once (keel serve renders on many HTTP
// threads); copies share the parsed tree. The caller owns `context`: unchanged until render returns.
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "keel/chat/jinja_evaluator.h"
#include "keel/chat/jinja_value.h"
#include "keel/chat/tagged_text.h"

namespace keel::jinja {

class Template {
 public:
  explicit Template(std::string_view source);

  // `context` holds the template's variables. Throws keel::Error when the template fails.
  TaggedText render(const DictData& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const Body> body_;
};

// A JSON document as template values; every value in it carries `tag`. Object key order is kept.
Value value_from_json(const nlohmann::ordered_json& j, Tag tag = kNoTag);

}  // namespace keel::jinja
