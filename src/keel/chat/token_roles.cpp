#include "keel/chat/token_roles.h"

#include "keel/util/error.h"

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

std::vector<Role> token_roles(const text::Tokenizer& tokenizer, std::span<const int32_t> ids,
                              const std::vector<RoleSpan>& spans) {
  const size_t text_size = spans.empty() ? 0 : spans.back().end;
  std::vector<Role> roles;
  roles.reserve(ids.size());
  text::Decoder::State state;
  size_t offset = 0;
  for (int32_t id : ids) {
    const size_t begin = offset;
    offset += tokenizer.decode_token_bytes(id, state).size();
    if (offset > text_size)
      throw Error("token roles: the tokens decode to more text than the rendered prompt holds (" +
                  std::to_string(offset) + " > " + std::to_string(text_size) + " bytes)");
    // A token that decodes to nothing (possible for a stripped prefix space) takes its
    // neighbour's role: the byte it sits on.
    roles.push_back(role_of_range(spans, begin, offset > begin ? offset : std::min(begin + 1, text_size)));
  }
  if (offset != text_size)
    throw Error("token roles: the tokens decode to " + std::to_string(offset) + " bytes but the prompt has " +
                std::to_string(text_size));
  return roles;
}

}  // namespace keel::chat
