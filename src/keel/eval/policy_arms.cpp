#include "keel/eval/policy_arms.h"

#include <algorithm>
#include <cctype>
#include <utility>

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

// "NAME: SPEC" names an arm; NAME is letters, digits and _ + . - (so the colon of a layer term's
// "k:int8" never reads as one).
std::pair<std::string, std::string> split_name(const std::string& arm) {
  const size_t colon = arm.find(": ");
  if (colon == std::string::npos || colon == 0) return {arm, arm};
  const std::string name = arm.substr(0, colon);
  const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '+' || c == '.' || c == '-';
  });
  if (!plain) return {arm, arm};
  std::string spec = arm.substr(colon + 2);
  spec.erase(0, spec.find_first_not_of(" \t"));
  if (spec.empty()) throw Error("--policies: the arm '" + name + "' has no policy after its name");
  return {name, spec};
}

PolicyArm make_arm(const std::string& arm) {
  const auto [label, spec] = split_name(arm);
  if (spec == "int2") return {label, kv::KvPolicy::parse("default=int2")};
  return {label, kv::KvPolicy::parse(spec)};
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
  for (const std::string& text : labels) {
    PolicyArm arm = make_arm(text);
    if (std::any_of(arms.begin(), arms.end(), [&](const PolicyArm& a) { return a.label == arm.label; }))
      throw Error("--policies: '" + arm.label + "' is listed twice");
    arms.push_back(std::move(arm));
  }
  return arms;
}

PolicyArm full_arm() { return {"full", kv::KvPolicy()}; }

}  // namespace keel::eval
