#include "keel/toolcall/json_scan.h"

#include <vector>

namespace keel::toolcall {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

std::string describe_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  static const char* kHex = "0123456789abcdef";
  return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 15];
}

JsonScan invalid(size_t at, const std::string& what) { return {JsonScan::Status::Invalid, at, what + " at byte " + std::to_string(at)}; }
JsonScan incomplete(std::string_view t) { return {JsonScan::Status::Incomplete, t.size(), ""}; }

// Scans a string whose opening quote is at t[i]. Returns the index after the closing quote, or
// t.size() + 1 when the text ends first, or an Invalid scan via `bad`.
enum class Piece { Done, Short, Bad };
struct PieceResult {
  Piece piece;
  size_t end;
  std::string error;
};

PieceResult scan_string(std::string_view t, size_t i) {
  ++i;
  while (i < t.size()) {
    const char c = t[i];
    if (c == '"') return {Piece::Done, i + 1, ""};
    if (static_cast<unsigned char>(c) < 0x20) return {Piece::Bad, i, "control character in a string"};
    if (c != '\\') {
      ++i;
      continue;
    }
    if (i + 1 >= t.size()) return {Piece::Short, t.size(), ""};
    const char e = t[i + 1];
    if (e == 'u') {
      for (size_t k = 0; k < 4; ++k) {
        if (i + 2 + k >= t.size()) return {Piece::Short, t.size(), ""};
        if (!is_hex(t[i + 2 + k])) return {Piece::Bad, i + 2 + k, "bad \\u escape"};
      }
      i += 6;
    } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
      i += 2;
    } else {
      return {Piece::Bad, i + 1, "bad escape \\" + std::string(1, e)};
    }
  }
  return {Piece::Short, t.size(), ""};
}

PieceResult scan_number(std::string_view t, size_t i) {
  auto at_end = [&](size_t k) { return k >= t.size(); };
  if (t[i] == '-') ++i;
  if (at_end(i)) return {Piece::Short, i, ""};
  if (t[i] == '0') {
    ++i;
  } else if (is_digit(t[i])) {
    while (!at_end(i) && is_digit(t[i])) ++i;
  } else {
    return {Piece::Bad, i, "expected a digit"};
  }
  if (!at_end(i) && t[i] == '.') {
    ++i;
    if (at_end(i)) return {Piece::Short, i, ""};
    if (!is_digit(t[i])) return {Piece::Bad, i, "expected a digit after '.'"};
    while (!at_end(i) && is_digit(t[i])) ++i;
  }
  if (!at_end(i) && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (!at_end(i) && (t[i] == '+' || t[i] == '-')) ++i;
    if (at_end(i)) return {Piece::Short, i, ""};
    if (!is_digit(t[i])) return {Piece::Bad, i, "expected an exponent digit"};
    while (!at_end(i) && is_digit(t[i])) ++i;
  }
  // The number may go on in text not yet generated.
  if (at_end(i)) return {Piece::Short, i, ""};
  return {Piece::Done, i, ""};
}

PieceResult scan_literal(std::string_view t, size_t i) {
  for (std::string_view word : {"true", "false", "null"}) {
    if (word[0] != t[i]) continue;
    for (size_t k = 0; k < word.size(); ++k) {
      if (i + k >= t.size()) return {Piece::Short, t.size(), ""};
      if (t[i + k] != word[k]) return {Piece::Bad, i + k, "expected " + std::string(word)};
    }
    return {Piece::Done, i + word.size(), ""};
  }
  return {Piece::Bad, i, "unexpected " + describe_byte(t[i])};
}

}  // namespace

size_t skip_json_space(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

JsonScan scan_json_value(std::string_view t, size_t pos) {
  // What the scanner expects next; the container stack says where a finished value goes.
  enum class Want { Value, ValueOrClose, Key, KeyOrClose, Colon, CommaOrClose };
  std::vector<char> stack;  // '{' or '['
  Want want = Want::Value;
  size_t i = pos;
  while (true) {
    i = skip_json_space(t, i);
    if (i >= t.size()) return incomplete(t);
    const char c = t[i];
    switch (want) {
      case Want::Value:
      case Want::ValueOrClose: {
        if (want == Want::ValueOrClose && c == ']') {
          stack.pop_back();
          ++i;
          break;
        }
        if (c == '{' || c == '[') {
          if (stack.size() >= kMaxJsonDepth) return invalid(i, "nesting deeper than " + std::to_string(kMaxJsonDepth));
          stack.push_back(c);
          ++i;
          want = c == '{' ? Want::KeyOrClose : Want::ValueOrClose;
          continue;
        }
        PieceResult r = c == '"' ? scan_string(t, i)
                        : (c == '-' || is_digit(c)) ? scan_number(t, i)
                                                    : scan_literal(t, i);
        if (r.piece == Piece::Bad) return invalid(r.end, r.error);
        if (r.piece == Piece::Short) return incomplete(t);
        i = r.end;
        break;
      }
      case Want::Key:
      case Want::KeyOrClose: {
        if (want == Want::KeyOrClose && c == '}') {
          stack.pop_back();
          ++i;
          break;
        }
        if (c != '"') return invalid(i, "expected a property name, got " + describe_byte(c));
        PieceResult r = scan_string(t, i);
        if (r.piece == Piece::Bad) return invalid(r.end, r.error);
        if (r.piece == Piece::Short) return incomplete(t);
        i = r.end;
        want = Want::Colon;
        continue;
      }
      case Want::Colon:
        if (c != ':') return invalid(i, "expected ':', got " + describe_byte(c));
        ++i;
        want = Want::Value;
        continue;
      case Want::CommaOrClose: {
        const char open = stack.back();
        if (c == ',') {
          ++i;
          want = open == '{' ? Want::Key : Want::Value;
          continue;
        }
        if ((open == '{' && c == '}') || (open == '[' && c == ']')) {
          stack.pop_back();
          ++i;
          break;
        }
        return invalid(i, std::string("expected ',' or '") + (open == '{' ? '}' : ']') + "', got " + describe_byte(c));
      }
    }
    // A value just finished.
    if (stack.empty()) return {JsonScan::Status::Complete, i, ""};
    want = Want::CommaOrClose;
  }
}

}  // namespace keel::toolcall
