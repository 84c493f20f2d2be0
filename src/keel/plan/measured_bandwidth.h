#pragma once
// This machine's memory read bandwidth as `keel bench` last measured it, cached in a small file so
// `keel plan` can turn active bytes per token into an estimated decode speed without measuring
// (measuring streams a 1 GiB buffer and takes seconds). The file is
// $KEEL_CACHE_DIR/machine_limits.json, else $XDG_CACHE_HOME/keel/..., else ~/.cache/keel/....
//
// Reads and writes a file: call from one thread at a time (the CLI's main thread).
#include <filesystem>
#include <optional>
#include <string>

namespace keel::plan {

struct MeasuredBandwidth {
  double bytes_per_s = 0;
  std::string source;  // "measured by keel bench at 2025-01-02T03:04:05Z, cached in PATH"
};

// nullopt when no cache location can be named ($HOME unset too).
std::optional<std::filesystem::path> bandwidth_cache_path();

// nullopt when nothing was cached or the file is unreadable or malformed (a cache, not an input).
std::optional<MeasuredBandwidth> read_measured_bandwidth();

// Best effort: returns the path written, or nullopt when the cache could not be written.
std::optional<std::filesystem::path> store_measured_bandwidth(double bytes_per_s);

}  // namespace keel::plan
