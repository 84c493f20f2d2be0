#include "tokenizer_support.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace keel::test {

std::map<std::string, int32_t> write_tokenizer_with_specials(const std::filesystem::path& from, const std::filesystem::path& to,
                                                             const std::vector<std::pair<std::string, std::string>>& renames,
                                                             const std::vector<std::string>& appended) {
  nlohmann::ordered_json tok = nlohmann::ordered_json::parse(read_text(from));
  nlohmann::ordered_json& added = tok.at("added_tokens");
  for (const auto& [old_content, new_content] : renames) {
    auto it = std::find_if(added.begin(), added.end(), [&](const auto& a) { return a.at("content") == old_content; });
    if (it == added.end()) throw std::runtime_error(from.string() + ": no added token " + old_content);
    (*it)["content"] = new_content;
    (*it)["special"] = true;
  }
  // The next free id is past both the BPE vocabulary and the added tokens.
  int32_t next = 0;
  for (const auto& [text, id] : tok.at("model").at("vocab").items()) next = std::max(next, id.get<int32_t>() + 1);
  for (const auto& a : added) next = std::max(next, a.at("id").get<int32_t>() + 1);
  for (const std::string& content : appended)
    added.push_back({{"id", next++}, {"content", content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  std::ofstream(to) << tok.dump();
  std::map<std::string, int32_t> ids;
  for (const auto& a : added) ids[a.at("content").get<std::string>()] = a.at("id").get<int32_t>();
  return ids;
}

}  // namespace keel::test
