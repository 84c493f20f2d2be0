#include "keel/chat/jinja_lexer.h"

#include <cctype>
#include <cstdint>

#include "keel/chat/jinja_error.h"
#include "keel/util/utf8.h"

namespace keel::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// jinja2 normalises \r\n and \r to \n and, without keep_trailing_newline, drops one final newline.
std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_source(source)) {}

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t open = find_tag_open(pos);
      std::string text = src_.substr(pos, open - pos);
      if (open == src_.size()) {
        emit_text(text, pos);
        break;
      }
      char kind = src_[open + 1];  // '{', '%' or '#'
      char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        lstrip_before_block(text, pos);
      }
      emit_text(text, pos);
      line_ = line_at(open);
      size_t inner = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        pos = skip_comment(inner);
      } else if (kind == '{') {
        tokens_.push_back({Token::Type::VariableBegin, "", line_});
        pos = lex_inside(inner, "}}", Token::Type::VariableEnd);
      } else {
        tokens_.push_back({Token::Type::BlockBegin, "", line_});
        pos = lex_inside(inner, "%}", Token::Type::BlockEnd);
        pos = maybe_raw(pos);
      }
    }
    tokens_.push_back({Token::Type::End, "", line_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  int line_at(size_t pos) {
    while (line_pos_ < pos && line_pos_ < src_.size()) {
      if (src_[line_pos_] == '\n') ++line_count_;
      ++line_pos_;
    }
    return line_count_;
  }

  size_t find_tag_open(size_t pos) const {
    while (true) {
      size_t p = src_.find('{', pos);
      if (p == std::string::npos || p + 1 >= src_.size()) return src_.size();
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      pos = p + 1;
    }
  }

  // lstrip_blocks: whitespace between the start of a line and a block tag is not output.
  void lstrip_before_block(std::string& text, size_t text_start) const {
    size_t nl = text.rfind('\n');
    size_t line_start = nl == std::string::npos ? 0 : nl + 1;
    bool at_line_start = nl != std::string::npos || text_start == 0 || src_[text_start - 1] == '\n';
    if (!at_line_start) return;
    for (size_t i = line_start; i < text.size(); ++i)
      if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\f' && text[i] != '\v') return;
    text.resize(line_start);
  }

  void emit_text(const std::string& text, size_t pos) {
    if (text.empty()) return;
    tokens_.push_back({Token::Type::Text, text, line_at(pos)});
  }

  // After a closing tag: `-` strips all following whitespace, `+` keeps it, otherwise
  // trim_blocks drops one newline (block and comment tags only).
  size_t after_close(size_t close_pos, size_t close_len, bool minus, bool plus, bool trim_newline) {
    size_t pos = close_pos + close_len;
    if (minus) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
    } else if (!plus && trim_newline && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  size_t skip_comment(size_t pos) {
    size_t close = src_.find("#}", pos);
    if (close == std::string::npos) fail("TemplateSyntaxError", "unclosed comment (line " + std::to_string(line_) + ")");
    bool minus = close > pos && src_[close - 1] == '-';
    bool plus = close > pos && src_[close - 1] == '+';
    return after_close(close, 2, minus, plus, true);
  }

  size_t lex_inside(size_t pos, std::string_view close, Token::Type end_type) {
    int depth = 0;  // brackets open; a closing tag only counts when they balance, like jinja2
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) fail("TemplateSyntaxError", "unexpected end of template, tag opened on line " + std::to_string(line_) + " is not closed");
      int line = line_at(pos);
      if (depth == 0) {
        for (char sign : {'-', '+', '\0'}) {
          size_t start = pos + (sign ? 1 : 0);
          if (sign && (pos >= src_.size() || src_[pos] != sign)) continue;
          if (src_.compare(start, close.size(), close) == 0) {
            if (sign == '+' && end_type == Token::Type::VariableEnd) continue;
            tokens_.push_back({end_type, "", line});
            return after_close(start, close.size(), sign == '-', sign == '+', end_type == Token::Type::BlockEnd);
          }
        }
      }
      char c = src_[pos];
      if (is_name_start(c)) {
        size_t end = pos;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        tokens_.push_back({Token::Type::Name, src_.substr(pos, end - pos), line});
        pos = end;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        pos = lex_number(pos, line);
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos, line);
      } else {
        static const char* const kOperators[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                                 ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
        bool matched = false;
        for (const char* op : kOperators) {
          std::string_view o(op);
          if (src_.compare(pos, o.size(), o) != 0) continue;
          if (o == "(" || o == "[" || o == "{") ++depth;
          if (o == ")" || o == "]" || o == "}") {
            if (depth == 0) fail("TemplateSyntaxError", "unexpected '" + std::string(o) + "' (line " + std::to_string(line) + ")");
            --depth;
          }
          tokens_.push_back({Token::Type::Operator, std::string(o), line});
          pos += o.size();
          matched = true;
          break;
        }
        if (!matched) fail("TemplateSyntaxError", std::string("unexpected character '") + c + "' (line " + std::to_string(line) + ")");
      }
    }
  }

  size_t lex_number(size_t pos, int line) {
    size_t end = pos;
    std::string digits;
    auto take_digits = [&] {
      while (end < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) {
        if (src_[end] != '_') digits += src_[end];
        ++end;
      }
    };
    take_digits();
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true;
      digits += '.';
      ++end;
      take_digits();
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t save = end;
      std::string save_digits = digits;
      digits += 'e';
      ++end;
      if (end < src_.size() && (src_[end] == '+' || src_[end] == '-')) digits += src_[end++];
      if (end < src_.size() && std::isdigit(static_cast<unsigned char>(src_[end]))) {
        take_digits();
        is_float = true;
      } else {
        end = save;
        digits = save_digits;
      }
    }
    tokens_.push_back({is_float ? Token::Type::Float : Token::Type::Integer, digits, line});
    return end;
  }

  // Python string-literal escapes, as jinja2 decodes them with unicode-escape.
  size_t lex_string(size_t pos, int line) {
    char quote = src_[pos++];
    std::string out;
    while (true) {
      if (pos >= src_.size()) fail("TemplateSyntaxError", "unterminated string (line " + std::to_string(line) + ")");
      char c = src_[pos];
      if (c == quote) {
        ++pos;
        break;
      }
      if (c != '\\' || pos + 1 >= src_.size()) {
        out += c;
        ++pos;
        continue;
      }
      char e = src_[pos + 1];
      pos += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t i = 0; i < n; ++i) {
            if (pos + i >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[pos + i])))
              fail("TemplateSyntaxError", "truncated \\" + std::string(1, e) + " escape (line " + std::to_string(line) + ")");
            cp = cp * 16 + static_cast<uint32_t>(std::stoi(std::string(1, src_[pos + i]), nullptr, 16));
          }
          if (cp > 0x10FFFF) fail("TemplateSyntaxError", "escape out of range (line " + std::to_string(line) + ")");
          pos += n;
          utf8::append(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2 && pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '7'; ++i)
              cp = cp * 8 + static_cast<uint32_t>(src_[pos++] - '0');
            utf8::append(out, cp);
          } else {
            out += '\\';  // unknown escapes stay as written, like Python
            out += e;
          }
      }
    }
    tokens_.push_back({Token::Type::String, out, line});
    return pos;
  }

  // {% raw %} ... {% endraw %}: everything in between is text.
  size_t maybe_raw(size_t pos) {
    size_t n = tokens_.size();
    if (n < 3 || tokens_[n - 2].type != Token::Type::Name || tokens_[n - 2].value != "raw" ||
        tokens_[n - 3].type != Token::Type::BlockBegin)
      return pos;
    tokens_.resize(n - 3);
    size_t search = pos;
    while (true) {
      size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail("TemplateSyntaxError", "missing endraw for raw block (line " + std::to_string(line_) + ")");
      size_t p = open + 2;
      bool minus = p < src_.size() && src_[p] == '-';
      if (minus || (p < src_.size() && src_[p] == '+')) ++p;
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      p += 6;
      while (p < src_.size() && is_space(src_[p])) ++p;
      bool close_minus = p < src_.size() && src_[p] == '-';
      bool close_plus = p < src_.size() && src_[p] == '+';
      if (close_minus || close_plus) ++p;
      if (src_.compare(p, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      std::string text = src_.substr(pos, open - pos);
      if (minus) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      emit_text(text, pos);
      return after_close(p, 2, close_minus, close_plus, true);
    }
  }

  std::string src_;
  std::vector<Token> tokens_;
  int line_ = 1;
  size_t line_pos_ = 0;
  int line_count_ = 1;
};

}  // namespace

std::vector<Token> tokenize_template(std::string_view source) { return Lexer(source).run(); }

}  // namespace keel::jinja
