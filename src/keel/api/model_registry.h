#pragma once
// Which names the served model answers to: its folder name and each --alias. Claude Code asks for
// names like "claude-sonnet-4-6"; the user maps them explicitly, or answers every name with the
// alias "*". Any other name is a 404 that lists the served names: a server must never answer with
// a model other than the one asked for.
//
// Threads: immutable after construction; any thread.
#include <string>
#include <vector>

namespace keel::api {

class ModelRegistry {
 public:
  ModelRegistry(std::string folder_name, std::vector<std::string> aliases);

  bool answers_to(const std::string& name) const;
  // Throws ApiError 404 not_found_error (OpenAI code "model_not_found") naming the served names.
  void require(const std::string& name) const;

  const std::string& id() const { return folder_name_; }
  const std::vector<std::string>& aliases() const { return aliases_; }
  bool wildcard() const { return wildcard_; }
  // The folder name and the explicit aliases (not "*").
  std::vector<std::string> names() const;

 private:
  std::string folder_name_;
  std::vector<std::string> aliases_;
  bool wildcard_ = false;
};

}  // namespace keel::api
