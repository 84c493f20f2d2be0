#include <algorithm>

#include "keel/arch/family.h"

namespace keel::arch {

// One line per family; each is defined in its own file (llama.cpp, qwen2.cpp, ...).
extern const Family kLlama, kMistral, kQwen2, kQwen3, kQwen3Moe, kGptOss, kGemma3Text, kGemma4Text;

namespace {
constexpr const Family* kFamilies[] = {&kLlama, &kMistral, &kQwen2, &kQwen3, &kQwen3Moe, &kGptOss, &kGemma3Text, &kGemma4Text};
}  // namespace

std::span<const Family* const> families() { return kFamilies; }

const Family* find_family(std::string_view model_type) {
  for (const Family* f : kFamilies)
    if (f->model_type == model_type) return f;
  return nullptr;
}

std::string family_list() {
  std::vector<std::string_view> names;
  for (const Family* f : kFamilies) names.push_back(f->model_type);
  std::sort(names.begin(), names.end());
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace keel::arch
