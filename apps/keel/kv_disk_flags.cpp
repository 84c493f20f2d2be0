#include "kv_disk_flags.h"

#include <cstdio>

#include "args.h"
#include "keel/kv/kv_disk_identity.h"
#include "keel/util/error.h"

namespace keel::cli {

kv::KvDiskOptions kv_disk_options(const std::optional<std::string>& dir, const std::optional<std::string>& gib,
                                  const ModelFiles& model) {
  kv::KvDiskOptions o;
  if (!dir) {
    if (gib) throw Error("--kv-disk-gb needs --kv-disk DIR");
    return o;
  }
  if (dir->empty()) throw Error("--kv-disk: the folder is empty");
  const double cap = gib ? parse_number_flag("kv-disk-gb", *gib, 0, kMaxGiB, true) : kDefaultKvDiskGiB;
  o.dir = *dir;
  o.max_bytes = static_cast<int64_t>(cap * static_cast<double>(int64_t{1} << 30));
  o.model_identity = kv::kv_model_identity(model);
  return o;
}

std::string describe_kv_disk(const kv::KvDiskStats& s, const std::filesystem::path& dir) {
  char line[512];
  std::snprintf(line, sizeof line, "KV disk tier: %s, cap %.1f GiB, %lld block files (%.2f GiB) found", dir.c_str(),
                static_cast<double>(s.cap_bytes) / (1 << 30), static_cast<long long>(s.files),
                static_cast<double>(s.bytes) / (1 << 30));
  return line;
}

}  // namespace keel::cli
