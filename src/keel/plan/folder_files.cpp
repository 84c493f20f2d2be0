#include "keel/plan/folder_files.h"

#include <algorithm>

#include "keel/util/error.h"

namespace keel::plan {
namespace fs = std::filesystem;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

std::vector<std::string> list_files(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  }
  if (ec) throw Error(dir.string() + ": cannot list the folder: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t disk_bytes(const fs::path& dir, const std::vector<std::string>& names) {
  uint64_t total = 0;
  for (const auto& n : names) {
    std::error_code ec;
    auto size = fs::file_size(dir / n, ec);
    if (!ec) total += size;
  }
  return total;
}

std::string join_names(const std::vector<std::string>& names, size_t max_shown) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max_shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > max_shown) out += " and " + std::to_string(names.size() - max_shown) + " more";
  return out;
}

}  // namespace keel::plan
