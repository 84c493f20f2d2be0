#pragma once
// Small helpers for looking at a model folder's file names: listing, matching, sizing, and
// naming a few of many in a message.
// Plain functions that read the file system and keep no state: any thread.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace keel::plan {

bool ends_with(const std::string& s, std::string_view suffix);
bool starts_with(const std::string& s, std::string_view prefix);

// The regular files at the top of the folder, sorted so messages come out in a stable order.
// Throws keel::Error when the folder cannot be listed.
std::vector<std::string> list_files(const std::filesystem::path& dir);

// Bytes on disk of the named files in `dir` (files that vanished count as 0).
uint64_t disk_bytes(const std::filesystem::path& dir, const std::vector<std::string>& names);

// "a, b, c and 4 more".
std::string join_names(const std::vector<std::string>& names, size_t max_shown = 3);

}  // namespace keel::plan
