#include "keel/api/model_registry.h"

#include <algorithm>

#include "keel/api/api_error.h"

namespace keel::api {

ModelRegistry::ModelRegistry(std::string folder_name, std::vector<std::string> aliases)
    : folder_name_(std::move(folder_name)) {
  for (auto& a : aliases) {
    if (a == "*") {
      wildcard_ = true;
    } else if (!a.empty() && a != folder_name_ && std::find(aliases_.begin(), aliases_.end(), a) == aliases_.end()) {
      aliases_.push_back(std::move(a));
    }
  }
}

bool ModelRegistry::answers_to(const std::string& name) const {
  return wildcard_ || name == folder_name_ || std::find(aliases_.begin(), aliases_.end(), name) != aliases_.end();
}

std::vector<std::string> ModelRegistry::names() const {
  std::vector<std::string> all{folder_name_};
  all.insert(all.end(), aliases_.begin(), aliases_.end());
  return all;
}

void ModelRegistry::require(const std::string& name) const {
  if (answers_to(name)) return;
  std::string served;
  for (const auto& n : names()) served += (served.empty() ? "\"" : ", \"") + n + "\"";
  throw model_not_found("model \"" + name + "\" is not served here; this server answers to " + served +
                  " (add names with --alias NAME, or --alias '*' for any name)");
}

}  // namespace keel::api
