#pragma once
// Rewriting a real tokenizer.json's added tokens, for tests that need a model's control tokens
// (gpt-oss's Harmony markers) on a tokenizer that the fixtures do have.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace keel::test {

// Reads tokenizer.json `from` and writes it to `to` with its added tokens changed: each
// {old, new} of `renames` gives the added token `old` the content `new` (keeping its id), and each
// of `appended` becomes a new added token with the next free id. Renamed and appended tokens are
// marked special. Returns every added token's content and id after the change. Throws when an
// `old` is not an added token of `from`.
std::map<std::string, int32_t> write_tokenizer_with_specials(const std::filesystem::path& from, const std::filesystem::path& to,
                                                             const std::vector<std::pair<std::string, std::string>>& renames,
                                                             const std::vector<std::string>& appended = {});

}  // namespace keel::test
