#include "keel/constrain/json_schema.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace keel::constrain {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxSchemaDepth = 64;

// Keywords that describe and never restrict.
const std::set<std::string, std::less<>> kAnnotations = {
    "title",   "description", "default",  "examples", "$schema",         "$id",        "$comment",
    "$defs",   "definitions", "format",   "deprecated", "readOnly",      "writeOnly",  "contentEncoding",
    "contentMediaType", "contentSchema", "$anchor", "strict", "propertyOrdering"};
// Restrictions on values that the grammar lets through: checked, if at all, after generation.
const std::set<std::string, std::less<>> kUnenforced = {
    "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "uniqueItems", "minProperties", "maxProperties"};
// Keywords the compiler understands.
const std::set<std::string, std::less<>> kStructural = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items", "minItems",
    "maxItems", "anyOf", "oneOf", "allOf", "nullable", "$ref"};

std::string join(const std::string& path, const std::string& key) { return path + "." + key; }

// The JSON text of a string's body, as the model writes it between the quotes.
std::string string_body(const std::string& s) {
  const std::string quoted = Json(s).dump();
  return quoted.substr(1, quoted.size() - 2);
}

// Gemma 4 writes keys bare, up to the ':': a name holding one of these would end early or read as
// something else.
constexpr std::string_view kBareKeyDelimiters = ",{}[]<\"' \t\r\n";
bool bare_key(std::string_view name) {
  return !name.empty() && name.find_first_of(kBareKeyDelimiters) == std::string_view::npos &&
         name.find(':') == std::string_view::npos;
}

// The grammar's string: a JSON string, or Gemma's <|"|>raw text<|"|>. Shared within it.
uint32_t string_node(Grammar& g) {
  if (g.string_value != ByteTrie::kNone) return g.string_value;
  if (g.syntax == ValueSyntax::Gemma) {
    g.string_value = g.add_sequence({g.add_literal(kGemmaQuote), g.add_text(std::string(kGemmaQuote))});
  } else {
    GrammarNode s;
    s.kind = NodeKind::String;
    g.string_value = g.add(std::move(s));
  }
  return g.string_value;
}

// What reads an undeclared key: a JSON string, or Gemma's bare key with its ':'.
uint32_t key_node(Grammar& g) {
  if (g.syntax == ValueSyntax::Gemma) return g.add_text(":", std::string(kBareKeyDelimiters));
  return string_node(g);
}

class Compiler {
 public:
  Compiler(Grammar& g, const Json& document, std::string where, UndeclaredKeys undeclared)
      : g_(g), document_(document), where_(std::move(where)), undeclared_(undeclared) {}

  uint32_t compile(const Json& schema, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) fail(path, "the schema nests more than " + std::to_string(kMaxSchemaDepth) + " levels");
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) fail(path, "the schema false accepts no value");
      return add_any_json(g_);
    }
    if (!schema.is_object()) fail(path, "a schema must be an object or a boolean");
    for (const auto& [key, value] : schema.items()) {
      if (kAnnotations.contains(key) || kStructural.contains(key)) continue;
      if (kUnenforced.contains(key)) {
        g_.unenforced.push_back(join(path, key));
        continue;
      }
      if (key.starts_with("x-")) continue;  // vendor extensions (OpenAPI)
      fail(join(path, key), "the keyword \"" + key + "\" is not supported for constrained output");
    }
    if (const auto ref = schema.find("$ref"); ref != schema.end()) {
      for (const auto& [key, value] : schema.items())
        if (key != "$ref" && !kAnnotations.contains(key))
          fail(join(path, key), "\"" + key + "\" beside $ref is not supported for constrained output");
      return reference(*ref, join(path, "$ref"), depth);
    }
    if (const auto all = schema.find("allOf"); all != schema.end()) return compile(merged(schema, path), path, depth + 1);
    for (const char* key : {"anyOf", "oneOf"}) {
      const auto it = schema.find(key);
      if (it == schema.end()) continue;
      for (const auto& [other, value] : schema.items())
        if (other != key && !kAnnotations.contains(other))
          fail(join(path, other), "\"" + other + "\" beside " + key + " is not supported for constrained output");
      const std::string where = join(path, key);
      if (!it->is_array() || it->empty()) fail(where, "must be a non-empty array of schemas");
      if (std::string_view(key) == "oneOf" && it->size() > 1) g_.unenforced.push_back(where);
      std::vector<uint32_t> alternatives;
      for (size_t i = 0; i < it->size(); ++i)
        alternatives.push_back(compile((*it)[i], where + "." + std::to_string(i), depth + 1));
      return choice(std::move(alternatives));
    }

    const std::vector<std::string> types = types_of(schema, path);
    if (schema.contains("enum") || schema.contains("const")) return literals(schema, types, path);
    std::vector<uint32_t> alternatives;
    for (const std::string& type : types) alternatives.push_back(typed(schema, type, path, depth));
    return choice(std::move(alternatives));
  }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& why) const {
    throw SchemaError(where_ + path + ": " + why);
  }

  // allOf as one schema: its members' keywords and the schema's own side by side. That is their
  // intersection as long as no keyword appears twice with different values and no member's
  // additionalProperties would have to see another member's properties; anything else is refused.
  Json merged(const Json& schema, const std::string& path) const {
    const Json& all = schema["allOf"];
    const std::string where = join(path, "allOf");
    if (!all.is_array() || all.empty()) fail(where, "must be a non-empty array of schemas");
    Json out = Json::object();
    auto take = [&](const Json& part, const std::string& at) {
      if (!part.is_object()) fail(at, "allOf members must be schema objects for constrained output");
      for (const auto& [key, value] : part.items()) {
        if (key == "allOf" && &part == &schema) continue;
        if (kAnnotations.contains(key)) continue;
        if (out.contains(key) && out[key] != value) {
          if (kUnenforced.contains(key)) continue;  // both are listed as unenforced below
          fail(join(at, key), "\"" + key + "\" appears twice in an allOf with different values, which is not supported for constrained output");
        }
        out[key] = value;
      }
    };
    take(schema, path);
    for (size_t i = 0; i < all.size(); ++i) {
      take(all[i], where + "." + std::to_string(i));
      for (const auto& [key, value] : all[i].items())
        if (kUnenforced.contains(key)) g_.unenforced.push_back(where + "." + std::to_string(i) + "." + key);
    }
    if (out.contains("additionalProperties") && all.size() > 1)
      fail(where, "additionalProperties inside an allOf is not supported for constrained output");
    return out;
  }

  uint32_t choice(std::vector<uint32_t> alternatives) {
    if (alternatives.size() == 1) return alternatives[0];
    GrammarNode node;
    node.kind = NodeKind::Choice;
    node.children = std::move(alternatives);
    return g_.add(std::move(node));
  }

  std::vector<std::string> types_of(const Json& schema, const std::string& path) const {
    std::vector<std::string> types;
    if (const auto t = schema.find("type"); t != schema.end()) {
      if (t->is_string()) types.push_back(t->get<std::string>());
      else if (t->is_array() && !t->empty())
        for (const Json& one : *t) {
          if (!one.is_string()) fail(join(path, "type"), "must be a string or an array of strings");
          types.push_back(one.get<std::string>());
        }
      else fail(join(path, "type"), "must be a string or an array of strings");
      for (const std::string& type : types)
        if (type != "object" && type != "array" && type != "string" && type != "number" && type != "integer" &&
            type != "boolean" && type != "null")
          fail(join(path, "type"), "unknown type \"" + type + "\"");
    } else {
      // No type: any value, as the specification says, the object keywords applying to objects
      // and the array keywords to arrays ({"properties": ...} also takes a string).
      types = {"object", "array", "string", "number", "boolean", "null"};
    }
    if (schema.value("nullable", false) && std::find(types.begin(), types.end(), "null") == types.end())
      types.push_back("null");
    return types;
  }

  static bool has_type(const Json& value, const std::string& type) {
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    if (type == "string") return value.is_string();
    if (type == "number") return value.is_number();
    if (type == "integer") return value.is_number_integer() || value.is_number_unsigned();
    if (type == "boolean") return value.is_boolean();
    return value.is_null();
  }

  // enum / const: the values' compact JSON texts, those of the allowed types only.
  uint32_t literals(const Json& schema, const std::vector<std::string>& types, const std::string& path) {
    std::vector<const Json*> values;
    if (const auto c = schema.find("const"); c != schema.end()) values.push_back(&*c);
    if (const auto e = schema.find("enum"); e != schema.end()) {
      if (!e->is_array() || e->empty()) fail(join(path, "enum"), "must be a non-empty array");
      if (!values.empty()) fail(join(path, "enum"), "enum beside const is not supported for constrained output");
      for (const Json& v : *e) values.push_back(&v);
    }
    std::vector<std::string> texts;
    for (const Json* v : values)
      for (const std::string& type : types)
        if (has_type(*v, type)) {
          texts.push_back(literal_text(*v, path));
          break;
        }
    if (texts.empty()) fail(path, "no value of enum/const has the schema's type");
    GrammarNode node;
    node.kind = NodeKind::Literals;
    node.trie = ByteTrie(texts);
    // A text that is a prefix of another must end where the longer one cannot go on: JSON values
    // never have that problem except numbers ("1" and "12"), which the trie handles as a choice.
    return g_.add(std::move(node));
  }

  // A value as the grammar's syntax writes it.
  std::string literal_text(const Json& v, const std::string& path) const {
    if (g_.syntax == ValueSyntax::Json) return v.dump(-1, ' ', false, Json::error_handler_t::strict);
    if (v.is_object() || v.is_array()) fail(path, "an object or array in enum/const is not supported for Gemma 4 calls");
    if (!v.is_string()) return v.dump();
    const std::string& text = v.get_ref<const std::string&>();
    if (text.find(kGemmaQuote) != std::string::npos) fail(path, "an enum/const string holding <|\"|> cannot be written in a Gemma 4 call");
    return std::string(kGemmaQuote) + text + std::string(kGemmaQuote);
  }

  uint32_t typed(const Json& schema, const std::string& type, const std::string& path, int depth) {
    if (type == "string") return string_node(g_);
    if (type == "number") return shared(g_.number_value, NodeKind::Number);
    if (type == "integer") return shared(g_.integer_value, NodeKind::Integer);
    if (type == "boolean") {
      GrammarNode node;
      node.trie = ByteTrie({"true", "false"});
      return g_.add(std::move(node));
    }
    if (type == "null") return g_.add_literal("null");
    if (type == "array") return array(schema, path, depth);
    return object(schema, path, depth);
  }

  uint32_t shared(uint32_t& slot, NodeKind kind) {
    if (slot == ByteTrie::kNone) {
      GrammarNode node;
      node.kind = kind;
      slot = g_.add(std::move(node));
    }
    return slot;
  }

  uint32_t array(const Json& schema, const std::string& path, int depth) {
    GrammarNode node;
    node.kind = NodeKind::Array;
    const auto bound = [&](const char* key, uint32_t fallback) {
      const auto it = schema.find(key);
      if (it == schema.end()) return fallback;
      if (!it->is_number_integer() || it->get<int64_t>() < 0) fail(join(path, key), "must be a non-negative integer");
      return static_cast<uint32_t>(std::min<int64_t>(it->get<int64_t>(), UINT32_MAX - 1));
    };
    node.min_items = bound("minItems", 0);
    node.max_items = bound("maxItems", UINT32_MAX);
    if (node.min_items > node.max_items) fail(path, "minItems is larger than maxItems: no array is valid");
    const auto items = schema.find("items");
    if (items != schema.end() && items->is_boolean() && !items->get<bool>()) {
      if (node.min_items > 0) fail(path, "items is false but minItems is above 0: no array is valid");
      node.max_items = 0;
      node.items = add_any_json(g_);
    } else if (items != schema.end() && items->is_array()) {
      fail(join(path, "items"), "an array of item schemas (tuple form) is not supported for constrained output");
    } else {
      node.items = items == schema.end() ? add_any_json(g_) : compile(*items, join(path, "items"), depth + 1);
    }
    return g_.add(std::move(node));
  }

  uint32_t object(const Json& schema, const std::string& path, int depth) {
    std::vector<std::string> names;
    std::vector<uint32_t> values;
    if (const auto props = schema.find("properties"); props != schema.end()) {
      if (!props->is_object()) fail(join(path, "properties"), "must be an object");
      for (const auto& [name, value] : props->items()) {
        names.push_back(name);
        values.push_back(compile(value, join(join(path, "properties"), name), depth + 1));
      }
    }
    uint32_t additional = ByteTrie::kNone;
    if (const auto extra = schema.find("additionalProperties"); extra == schema.end()) {
      // Closed: only declared keys, unless nothing is declared (a free-form object).
      const bool free_form = !schema.contains("properties") && !schema.contains("required");
      if (undeclared_ == UndeclaredKeys::Open || free_form) additional = add_any_json(g_);
    } else if (!extra->is_boolean() || extra->get<bool>()) {
      additional = compile(*extra, join(path, "additionalProperties"), depth + 1);
    }
    uint64_t required = 0;
    if (const auto req = schema.find("required"); req != schema.end()) {
      if (!req->is_array()) fail(join(path, "required"), "must be an array of property names");
      for (const Json& r : *req) {
        if (!r.is_string()) fail(join(path, "required"), "must be an array of property names");
        const std::string name = r.get<std::string>();
        auto it = std::find(names.begin(), names.end(), name);
        if (it == names.end()) {
          // Required but not declared: an undeclared key with the additional schema, named.
          if (additional == ByteTrie::kNone)
            fail(join(path, "required"), "\"" + name + "\" is required but additionalProperties is false and it is not in properties: no object is valid");
          names.push_back(name);
          values.push_back(additional);
          it = names.end() - 1;
        }
        if (names.size() > kMaxProperties) break;
        required |= uint64_t{1} << (it - names.begin());
      }
    }
    if (names.size() > kMaxProperties)
      fail(join(path, "properties"), "more than " + std::to_string(kMaxProperties) + " properties are not supported for constrained output");
    GrammarNode node;
    node.kind = NodeKind::Object;
    std::vector<std::string> bodies;
    for (const std::string& name : names) {
      if (g_.syntax == ValueSyntax::Gemma && !bare_key(name))
        fail(join(join(path, "properties"), name), "a key Gemma 4 cannot write bare is not supported for constrained output");
      bodies.push_back(g_.syntax == ValueSyntax::Gemma ? name : string_body(name));
    }
    node.trie = ByteTrie(bodies);
    if (g_.syntax == ValueSyntax::Json) node.trie.mark_string_states();
    node.bare_keys = g_.syntax == ValueSyntax::Gemma;
    node.children = std::move(values);
    node.required = required;
    node.additional = additional;
    if (additional != ByteTrie::kNone) node.key_string = key_node(g_);
    return g_.add(std::move(node));
  }

  // $ref to the document's root or to a schema under $defs / definitions (JSON Pointer escapes
  // ~0 and ~1 understood). Each target compiles once, so recursive schemas become cycles.
  uint32_t reference(const Json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) fail(path, "must be a string");
    const std::string target = ref.get<std::string>();
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target != "#" && !target.starts_with("#/"))
      fail(path, "only references within the schema (\"#/$defs/...\") are supported, not \"" + target + "\"");
    const Json* at = &document_;
    size_t pos = 1;
    while (pos < target.size()) {
      const size_t next = std::min(target.find('/', pos + 1), target.size());
      std::string token;  // JSON Pointer escapes: ~1 is '/', ~0 is '~'
      for (size_t i = pos + 1; i < next; ++i) {
        const bool escape = target[i] == '~' && i + 1 < next && (target[i + 1] == '0' || target[i + 1] == '1');
        token += escape ? (target[++i] == '1' ? '/' : '~') : target[i];
      }
      if (!at->is_object() || !at->contains(token)) fail(path, "\"" + target + "\" does not resolve within the schema");
      at = &(*at)[token];
      pos = next;
    }
    // The node is reserved first: a reference back to it inside the target ends there.
    GrammarNode indirection;
    indirection.kind = NodeKind::Choice;
    const uint32_t slot = g_.add(std::move(indirection));
    refs_[target] = slot;
    const uint32_t compiled = compile(*at, where_of(target), depth + 1);
    g_.nodes[slot].children = {compiled};
    return slot;
  }

  static std::string where_of(const std::string& target) { return target == "#" ? "" : "." + target.substr(2); }

  Grammar& g_;
  const Json& document_;
  std::string where_;
  UndeclaredKeys undeclared_;
  std::map<std::string, uint32_t> refs_;
};

// A cycle of Choice nodes (a $ref that resolves to itself) would let the matcher recurse forever
// without reading a byte.
void refuse_empty_cycles(const Grammar& g, const std::string& where) {
  std::vector<uint8_t> mark(g.nodes.size(), 0);  // 0 new, 1 on the path, 2 done
  std::function<void(uint32_t)> visit = [&](uint32_t n) {
    if (mark[n] == 2) return;
    if (mark[n] == 1) throw SchemaError(where + ": a $ref cycle that never writes a value");
    mark[n] = 1;
    if (g.nodes[n].kind == NodeKind::Choice)
      for (uint32_t c : g.nodes[n].children) visit(c);
    mark[n] = 2;
  };
  for (uint32_t n = 0; n < g.nodes.size(); ++n) visit(n);
}

}  // namespace

uint32_t add_any_json(Grammar& g) {
  if (g.any_value != ByteTrie::kNone) return g.any_value;
  // any := object of any | array of any | string | number | true | false | null
  GrammarNode any;
  any.kind = NodeKind::Choice;
  g.any_value = g.add(std::move(any));
  string_node(g);
  if (g.number_value == ByteTrie::kNone) {
    GrammarNode n;
    n.kind = NodeKind::Number;
    g.number_value = g.add(std::move(n));
  }
  GrammarNode object;
  object.kind = NodeKind::Object;
  object.additional = g.any_value;
  object.key_string = key_node(g);
  object.bare_keys = g.syntax == ValueSyntax::Gemma;
  object.trie = ByteTrie(std::vector<std::string>{});
  const uint32_t object_node = g.add(std::move(object));
  GrammarNode array;
  array.kind = NodeKind::Array;
  array.items = g.any_value;
  const uint32_t array_node = g.add(std::move(array));
  GrammarNode words;
  words.trie = ByteTrie({"true", "false", "null"});
  const uint32_t words_node = g.add(std::move(words));
  g.nodes[g.any_value].children = {object_node, array_node, g.string_value, g.number_value, words_node};
  return g.any_value;
}

uint32_t add_closed_object(Grammar& g, const std::vector<std::pair<std::string, uint32_t>>& properties) {
  GrammarNode node;
  node.kind = NodeKind::Object;
  std::vector<std::string> bodies;
  for (const auto& [name, value] : properties) {
    bodies.push_back(string_body(name));
    node.children.push_back(value);
  }
  node.trie = ByteTrie(bodies);
  node.trie.mark_string_states();
  node.required = properties.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << properties.size()) - 1;
  return g.add(std::move(node));
}

uint32_t add_json_schema(Grammar& grammar, const nlohmann::ordered_json& schema, const std::string& where,
                         UndeclaredKeys undeclared) {
  Compiler compiler(grammar, schema, where, undeclared);
  const uint32_t node = compiler.compile(schema, "", 0);
  refuse_empty_cycles(grammar, where);
  return node;
}

Grammar compile_json_schema(const nlohmann::ordered_json& schema, const std::string& where, UndeclaredKeys undeclared) {
  Grammar grammar;
  grammar.root = add_json_schema(grammar, schema, where, undeclared);
  return grammar;
}

}  // namespace keel::constrain
