#include "keel/plan/measured_bandwidth.h"

#include <cstdlib>
#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

namespace keel::plan {
namespace fs = std::filesystem;

std::optional<fs::path> bandwidth_cache_path() {
  constexpr const char* kFile = "machine_limits.json";
  if (const char* dir = std::getenv("KEEL_CACHE_DIR"); dir && *dir) return fs::path(dir) / kFile;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "keel" / kFile;
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "keel" / kFile;
  return std::nullopt;
}

std::optional<MeasuredBandwidth> read_measured_bandwidth() {
  const auto path = bandwidth_cache_path();
  if (!path) return std::nullopt;
  std::ifstream in(*path);
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto bw = j.find("read_bandwidth_bytes_per_s");
  if (bw == j.end() || !bw->is_number() || bw->get<double>() <= 0) return std::nullopt;
  const std::string when = j.value("measured_at", std::string("an unknown time"));
  return MeasuredBandwidth{bw->get<double>(), "measured by keel bench at " + when + ", cached in " + path->string()};
}

std::optional<fs::path> store_measured_bandwidth(double bytes_per_s) {
  const auto path = bandwidth_cache_path();
  if (!path || bytes_per_s <= 0) return std::nullopt;
  std::error_code ec;
  fs::create_directories(path->parent_path(), ec);
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  // Written aside and renamed, so a plan running at the same moment never reads half a file.
  const fs::path tmp = path->string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return std::nullopt;
    out << nlohmann::json{{"read_bandwidth_bytes_per_s", bytes_per_s}, {"measured_at", when}}.dump(2) << "\n";
    if (!out) return std::nullopt;
  }
  fs::rename(tmp, *path, ec);
  if (ec) return std::nullopt;
  return path;
}

}  // namespace keel::plan
