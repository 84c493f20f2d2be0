// Fuzz target: random Unicode through render -> tokenize -> token roles, with the bundled
// tiny-toolcaller's template and tokenizer (NFC-normalizing byte-level BPE). The input, read as
// UTF-8 with every invalid byte turned into a combining mark or a Hangul jamo (so that mutations
// keep producing text NFC rewrites), is cut at '|' into system text, user text, tool-call argument
// and tool result. token_roles must give one role per token and never throw; and since the
// tokenizer reads text as its NFC form, the NFC form of the same conversation must give the same
// tokens with the same roles.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "keel/chat/chat_renderer.h"
#include "keel/chat/template_files.h"
#include "keel/chat/token_roles.h"
#include "keel/text/tokenizer.h"
#include "keel/text/unicode_normalization.h"
#include "keel/util/utf8.h"

namespace {

using json = nlohmann::ordered_json;
using namespace keel;

std::filesystem::path model_dir() {
  const char* env = std::getenv("KEEL_SHARED_DIR");
  const std::filesystem::path shared =
      env ? std::filesystem::path(env) : std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "shared";
  return shared / "models" / "tiny-toolcaller";
}

struct Model {
  text::Tokenizer tokenizer = text::Tokenizer::from_file(model_dir());
  chat::ChatTemplate tmpl = [] {
    const auto src = chat::load_chat_template_source(model_dir());
    return chat::ChatTemplate(src.source, src.bos_token, src.eos_token);
  }();
};

const Model& model() {
  static const Model m;
  return m;
}

// Valid UTF-8 sequences are kept; any other byte b becomes a combining mark (U+0300 + b % 0x70)
// or a Hangul jamo, which NFC composes with what comes before.
std::string as_text(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size();) {
    const auto b = static_cast<unsigned char>(in[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool valid = len > 0 && i + len <= in.size();
    for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(in[i + k]) & 0xC0) == 0x80;
    if (valid && len > 1) {
      // Reject overlong forms, surrogates and values past U+10FFFF by a round trip.
      char32_t c = b & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(in[i + k]) & 0x3F);
      std::string again;
      keel::utf8::append(again, c);
      valid = again == in.substr(i, len) && !(c >= 0xD800 && c <= 0xDFFF) && c <= 0x10FFFF;
    }
    if (valid && b != 0) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      keel::utf8::append(out, static_cast<char32_t>(b % 3 == 0 ? 0x1161 + b % 21 : 0x300 + b % 0x70));
      ++i;
    }
  }
  return out;
}

json conversation(const std::vector<std::string>& parts) {
  auto part = [&](size_t i) { return i < parts.size() ? parts[i] : std::string("x"); };
  const json call = {{"id", "call_1"}, {"type", "function"},
                     {"function", {{"name", "Bash"}, {"arguments", json{{"command", part(2)}}.dump()}}}};
  return json::array({{{"role", "system"}, {"content", part(0)}},
                      {{"role", "user"}, {"content", part(1)}},
                      {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}},
                      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", part(3)}}});
}

struct Encoded {
  std::vector<int32_t> ids;
  std::vector<chat::Role> roles;
};

Encoded encode(const json& messages) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "Bash", "description": "Run it.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}])");
  const chat::RenderedPrompt p = model().tmpl.render(messages, tools, json{{"add_generation_prompt", true}});
  Encoded e{chat::encode_rendered_prompt(model().tokenizer, p.text, p.spans), {}};
  e.roles = chat::token_roles(model().tokenizer, e.ids, p.text, p.spans);
  if (e.roles.size() != e.ids.size()) std::abort();
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text = as_text(std::string_view(reinterpret_cast<const char*>(data), size));
  std::vector<std::string> parts(1), nfc_parts;
  for (char c : text) {
    if (c == '|') parts.emplace_back();
    else parts.back() += c;
  }
  for (const auto& p : parts) nfc_parts.push_back(text::normalize_unicode(p, text::NormalizationForm::NFC));
  const Encoded raw = encode(conversation(parts));
  const Encoded nfc = encode(conversation(nfc_parts));
  if (raw.ids == nfc.ids && raw.roles != nfc.roles) std::abort();
  return 0;
}
