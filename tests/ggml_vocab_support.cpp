#include "ggml_vocab_support.h"

#include <gtest/gtest.h>

#include <sstream>

#include "test_support.h"

namespace keel::test {

std::vector<VocabVector> read_ggml_vectors(const std::filesystem::path& stem) {
  const std::string inp = read_text(stem.string() + ".inp");
  const std::string out = read_text(stem.string() + ".out");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    size_t end = inp.find(separator, pos);
    if (end == std::string::npos) end = inp.size();
    texts.push_back(inp.substr(pos, end - pos));
    pos = end + separator.size();
  }
  std::vector<VocabVector> cases;
  std::istringstream lines(out);
  std::string line;
  for (const auto& text : texts) {
    if (!std::getline(lines, line)) break;
    VocabVector c{text, {}};
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << stem << ": .out has fewer lines than .inp has texts";
  return cases;
}

}  // namespace keel::test
