#include "keel/eval/policy_arms.h"

#include <algorithm>

#include "keel/util/error.h"

namespace keel::eval {
namespace {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(sep, i);
    if (j == std::string_view::npos) j = text.size();
    std::string word(text.substr(i, j - i));
    word.erase(0, word.find_first_not_of(" \t"));
    word.erase(word.find_last_not_of(" \t") + 1);
    if (!word.empty()) out.push_back(word);
    i = j + 1;
  }
  return out;
}

PolicyArm make_arm(const std::string& label) {
  if (label == "int2") return {label, kv::KvPolicy::parse("default=int2")};
  return {label, kv::KvPolicy::parse(label)};
}

}  // namespace

std::vector<PolicyArm> parse_policy_list(std::string_view text) {
  std::vector<std::string> labels;
  for (const std::string& group : split(text, ';')) {
    bool previous_was_spec = false;
    for (const std::string& word : split(group, ',')) {
      const bool spec_word = word.find('=') != std::string::npos;
      if (spec_word && previous_was_spec)
        labels.back() += " " + word;
      else
        labels.push_back(word);
      previous_was_spec = spec_word;
    }
  }
  if (labels.empty()) throw Error("--policies: no KV policy given");
  std::vector<PolicyArm> arms;
  for (const std::string& label : labels) {
    if (std::any_of(arms.begin(), arms.end(), [&](const PolicyArm& a) { return a.label == label; }))
      throw Error("--policies: '" + label + "' is listed twice");
    arms.push_back(make_arm(label));
  }
  return arms;
}

PolicyArm full_arm() { return {"full", kv::KvPolicy()}; }

}  // namespace keel::eval
