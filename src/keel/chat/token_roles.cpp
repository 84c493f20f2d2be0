#include "keel/chat/token_roles.h"

#include <algorithm>

namespace keel::chat {

std::vector<text::ByteRange> template_markup_ranges(const std::vector<RoleSpan>& spans) {
  std::vector<text::ByteRange> ranges;
  for (const auto& s : spans) {
    if (s.role != Role::scaffolding || s.end <= s.begin) continue;
    if (!ranges.empty() && ranges.back().end == s.begin) ranges.back().end = s.end;
    else ranges.push_back({s.begin, s.end});
  }
  return ranges;
}

std::vector<int32_t> encode_rendered_prompt(const text::Tokenizer& tokenizer, std::string_view text,
                                            const std::vector<RoleSpan>& spans) {
  const std::vector<text::ByteRange> markup = template_markup_ranges(spans);
  return tokenizer.encode(text, text::SpecialTokenScope::within(markup));
}

namespace {

// The bytes `ids` decode to, one token after another; `ends[i]` is where token i's bytes end.
std::string decode_bytes(const text::Tokenizer& tokenizer, std::span<const int32_t> ids,
                         std::vector<size_t>* ends = nullptr) {
  std::string out;
  text::Decoder::State state;
  for (int32_t id : ids) {
    out += tokenizer.decode_token_bytes(id, state);
    if (ends) ends->push_back(out.size());
  }
  return out;
}

// What `piece` decodes to once encoded: its normalized spelling.
std::string decoded_form(const text::Tokenizer& tokenizer, std::string_view piece) {
  return decode_bytes(tokenizer, tokenizer.encode(piece, false));
}

// A run of decoded bytes and the rendered text it came from. An exact piece is the same bytes on
// both sides; any other maps as a whole (a normalized character and its original spelling).
struct Piece {
  size_t decoded_begin, decoded_end;
  size_t text_begin, text_end;
  bool exact;
};

void append(std::vector<Piece>& pieces, Piece p) {
  if (p.exact && !pieces.empty() && pieces.back().exact && pieces.back().decoded_end == p.decoded_begin)
    pieces.back().decoded_end = p.decoded_end, pieces.back().text_end = p.text_end;
  else
    pieces.push_back(p);
}

// When nothing finer holds: the common prefix and suffix map exactly, the middle as one piece.
std::vector<Piece> coarse_alignment(std::string_view decoded, std::string_view text) {
  const size_t shorter = std::min(decoded.size(), text.size());
  size_t prefix = 0;
  while (prefix < shorter && decoded[prefix] == text[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < shorter - prefix && decoded[decoded.size() - 1 - suffix] == text[text.size() - 1 - suffix]) ++suffix;
  std::vector<Piece> pieces;
  append(pieces, {0, prefix, 0, prefix, true});
  append(pieces, {prefix, decoded.size() - suffix, prefix, text.size() - suffix, false});
  append(pieces, {decoded.size() - suffix, decoded.size(), text.size() - suffix, text.size(), true});
  return pieces;
}

// Aligns the decoded prompt with the rendered text. Normalizers (NFC, NFKC...) and decoders may
// change byte lengths, but only within a character and the combining marks after it: no
// normalization form composes across an ASCII byte or reorders around one. So the text is cut
// before every ASCII byte, each piece's decoded form is decoded_form(piece), and the forms must
// spell the decoded prompt in order. If they do not (a normalizer keel's cut does not fit), the
// coarse alignment above still gives every token a role.
std::vector<Piece> align(const text::Tokenizer& tokenizer, std::string_view decoded, std::string_view text) {
  if (decoded == text) return {{0, text.size(), 0, text.size(), true}};
  std::vector<Piece> pieces;
  size_t d = 0;
  for (size_t t = 0; t < text.size();) {
    size_t end = t + 1;
    while (end < text.size() && static_cast<unsigned char>(text[end]) >= 0x80) ++end;
    const std::string_view piece = text.substr(t, end - t);
    const bool ascii = end == t + 1 && static_cast<unsigned char>(text[t]) < 0x80;
    const std::string form = ascii ? std::string(piece) : decoded_form(tokenizer, piece);
    if (decoded.substr(d, form.size()) != form) return coarse_alignment(decoded, text);
    // A changed piece that starts with an ASCII byte: keep that byte exact when the change lies
    // wholly after it (a newline before "\u212B"), so the byte keeps its own role.
    const bool lead = static_cast<unsigned char>(text[t]) < 0x80 && end > t + 1 && form != piece &&
                      form[0] == text[t] && decoded_form(tokenizer, piece.substr(1)) == std::string_view(form).substr(1);
    if (lead) append(pieces, {d, d + 1, t, t + 1, true});
    append(pieces, {d + lead, d + form.size(), t + lead, end, form == piece});
    d += form.size();
    t = end;
  }
  if (d != decoded.size()) return coarse_alignment(decoded, text);
  return pieces;
}

}  // namespace

std::vector<Role> token_roles(const text::Tokenizer& tokenizer, std::span<const int32_t> ids, std::string_view text,
                              const std::vector<RoleSpan>& spans) {
  std::vector<size_t> ends;
  ends.reserve(ids.size());
  const std::string decoded = decode_bytes(tokenizer, ids, &ends);
  const std::vector<Piece> pieces = align(tokenizer, decoded, text);

  std::vector<Role> roles;
  roles.reserve(ids.size());
  size_t piece = 0;  // tokens walk the pieces in order
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t begin = i == 0 ? 0 : ends[i - 1], end = ends[i];
    while (piece + 1 < pieces.size() && pieces[piece].decoded_end <= begin) ++piece;
    const Piece& first = pieces[piece];
    size_t last_index = piece;
    while (last_index + 1 < pieces.size() && pieces[last_index].decoded_end < end) ++last_index;
    const Piece& last = pieces[last_index];
    const size_t text_begin = first.exact ? first.text_begin + (begin - first.decoded_begin) : first.text_begin;
    const size_t text_end = last.exact ? last.text_begin + (end - last.decoded_begin) : last.text_end;
    // A token that decodes to nothing (a stripped prefix space) takes the role of the byte it sits on.
    roles.push_back(role_of_range(spans, text_begin, std::max(text_end, std::min(text_begin + 1, text.size()))));
  }
  return roles;
}

}  // namespace keel::chat
