#pragma once
// --kv-disk DIR and --kv-disk-gb N (keel serve, keel bench --session): the KV pool's disk tier.
#include <filesystem>
#include <optional>
#include <string>

#include "keel/kv/kv_disk_tier.h"
#include "keel/model/model_files.h"

namespace keel::cli {

inline constexpr double kDefaultKvDiskGiB = 8;

// The disk tier's options: none when `dir` is absent; otherwise the folder, its cap (`gib`, else
// kDefaultKvDiskGiB; range-checked) and the identity of `model`'s files. `--kv-disk-gb`
// without `--kv-disk` is refused. Throws keel::Error.
kv::KvDiskOptions kv_disk_options(const std::optional<std::string>& dir, const std::optional<std::string>& gib,
                                  const ModelFiles& model);

// One line for the log: "KV disk tier: DIR/NAMESPACE, cap 8.0 GiB, 12 files (1.2 GiB) found".
std::string describe_kv_disk(const kv::KvDiskStats& stats, const std::filesystem::path& dir);

}  // namespace keel::cli
