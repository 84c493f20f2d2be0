#include "keel/kv/kv_disk_block.h"

#include <cstdio>
#include <cstring>

namespace keel::kv {
namespace {

constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'K', 'V', 'B', '\0'};
constexpr uint32_t kVersion = 1;
// magic, version, header bytes, namespace, 5 ids, format/flags/groups/pad, tokens.
constexpr size_t kFixedBytes = 8 + 4 + 4 + 8 + 5 * 8 + 8 + 4 * kKvBlockTokens;
constexpr size_t kGroupBytes = 8 + 8 + 4 + 4;

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  const auto at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <typename T>
T get(std::span<const uint8_t> in, size_t& at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull,
                   kP4 = 0x85EBCA77C2B2AE63ull, kP5 = 0x27D4EB2F165667C5ull;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
uint64_t round(uint64_t acc, uint64_t input) { return rotl(acc + input * kP2, 31) * kP1; }
uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

int64_t KvDiskBlock::row_bytes() const {
  int64_t n = 0;
  for (const KvDiskGroupRows& g : groups) n += static_cast<int64_t>(g.full.size() + g.quantized.size());
  return n;
}

std::string kv_disk_file_name(uint64_t hash, uint64_t check) {
  char name[40];
  std::snprintf(name, sizeof name, "%016llx%016llx.kvb", static_cast<unsigned long long>(hash),
                static_cast<unsigned long long>(check));
  return name;
}

uint64_t kv_disk_checksum(std::span<const uint8_t> bytes) {
  const uint8_t* p = bytes.data();
  const size_t n = bytes.size();
  size_t at = 0;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = kP1 + kP2, v2 = kP2, v3 = 0, v4 = 0 - kP1;
    for (; at + 32 <= n; at += 32) {
      v1 = round(v1, load64(p + at));
      v2 = round(v2, load64(p + at + 8));
      v3 = round(v3, load64(p + at + 16));
      v4 = round(v4, load64(p + at + 24));
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    for (uint64_t v : {v1, v2, v3, v4}) h = (h ^ round(0, v)) * kP1 + kP4;
  } else {
    h = kP5;
  }
  h += static_cast<uint64_t>(n);
  for (; at + 8 <= n; at += 8) h = rotl(h ^ round(0, load64(p + at)), 27) * kP1 + kP4;
  for (; at < n; ++at) h = rotl(h ^ (p[at] * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  return h ^ (h >> 32);
}

std::vector<uint8_t> kv_disk_encode(const KvDiskBlock& block, uint64_t namespace_key) {
  std::vector<uint8_t> out;
  const size_t header = kFixedBytes + kGroupBytes * block.groups.size();
  out.reserve(header + static_cast<size_t>(block.row_bytes()) + 8);
  out.resize(sizeof kMagic);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  put<uint32_t>(out, kVersion);
  put<uint32_t>(out, static_cast<uint32_t>(header));
  put<uint64_t>(out, namespace_key);
  const KvDiskBlockId& id = block.id;
  for (uint64_t v : {id.hash, id.check, id.parent_hash, id.parent_check, id.cache_salt}) put<uint64_t>(out, v);
  put<uint8_t>(out, static_cast<uint8_t>(id.format));
  put<uint8_t>(out, block.full_kept_for_branch ? 1 : 0);
  put<uint16_t>(out, static_cast<uint16_t>(block.groups.size()));
  put<uint32_t>(out, 0);
  for (int32_t t : id.tokens) put<int32_t>(out, t);
  for (const KvDiskGroupRows& g : block.groups) {
    put<uint64_t>(out, g.full.size());
    put<uint64_t>(out, g.quantized.size());
    put<uint32_t>(out, static_cast<uint32_t>(g.quantized_layers));
    put<uint32_t>(out, g.kept_for_branch ? 1 : 0);
  }
  for (const KvDiskGroupRows& g : block.groups) {
    out.insert(out.end(), g.full.begin(), g.full.end());
    out.insert(out.end(), g.quantized.begin(), g.quantized.end());
  }
  put<uint64_t>(out, kv_disk_checksum(out));
  return out;
}

KvDiskDecode kv_disk_decode(std::span<const uint8_t> file, uint64_t namespace_key, const KvDiskBlockId& expected,
                            const KvBlockLayout& layout, KvDiskBlock& out) {
  if (file.size() < kFixedBytes + 8 || std::memcmp(file.data(), kMagic, 8) != 0) return KvDiskDecode::Corrupt;
  size_t at = 8;
  if (get<uint32_t>(file, at) != kVersion) return KvDiskDecode::Corrupt;
  const auto header = get<uint32_t>(file, at);
  if (header < kFixedBytes || header > file.size() - 8) return KvDiskDecode::Corrupt;
  // Everything, header included, is covered by the checksum: check it before trusting a field.
  uint64_t stored;
  std::memcpy(&stored, file.data() + file.size() - 8, 8);
  if (kv_disk_checksum(file.first(file.size() - 8)) != stored) return KvDiskDecode::Corrupt;

  KvDiskBlock block;
  const auto ns = get<uint64_t>(file, at);
  KvDiskBlockId& id = block.id;
  id.hash = get<uint64_t>(file, at);
  id.check = get<uint64_t>(file, at);
  id.parent_hash = get<uint64_t>(file, at);
  id.parent_check = get<uint64_t>(file, at);
  id.cache_salt = get<uint64_t>(file, at);
  const auto format = get<uint8_t>(file, at);
  if (format >= std::size(kAllKvFormats)) return KvDiskDecode::Corrupt;
  id.format = static_cast<KvFormat>(format);
  block.full_kept_for_branch = get<uint8_t>(file, at) != 0;
  const auto groups = get<uint16_t>(file, at);
  at += 4;
  for (int32_t& t : id.tokens) t = get<int32_t>(file, at);
  if (ns != namespace_key || !(id == expected)) return KvDiskDecode::Mismatched;
  if (groups != layout.group_count() || header != kFixedBytes + kGroupBytes * groups) return KvDiskDecode::Corrupt;

  block.groups.resize(groups);
  size_t payload = 0;
  for (int64_t g = 0; g < groups; ++g) {
    KvDiskGroupRows& rows = block.groups[static_cast<size_t>(g)];
    const auto full = get<uint64_t>(file, at), quantized = get<uint64_t>(file, at);
    rows.quantized_layers = get<uint32_t>(file, at);
    rows.kept_for_branch = get<uint32_t>(file, at) != 0;
    const auto layers = static_cast<int64_t>(layout.group(g).layers.size());
    const bool full_ok = full == 0 || full == layout.group_bytes(g, KvFormat::BF16);
    const bool quantized_ok = quantized == 0 ? rows.quantized_layers == 0
                                             : layout.quantizes(g, id.format) && quantized == layout.group_bytes(g, id.format) &&
                                                   rows.quantized_layers <= layers;
    if (!full_ok || !quantized_ok) return KvDiskDecode::Corrupt;
    rows.full.resize(full);
    rows.quantized.resize(quantized);
    payload += full + quantized;
  }
  if (header + payload + 8 != file.size()) return KvDiskDecode::Corrupt;
  for (KvDiskGroupRows& rows : block.groups) {
    for (std::vector<uint8_t>* rows_of_form : {&rows.full, &rows.quantized}) {
      if (rows_of_form->empty()) continue;
      std::memcpy(rows_of_form->data(), file.data() + at, rows_of_form->size());
      at += rows_of_form->size();
    }
  }
  out = std::move(block);
  return KvDiskDecode::Ok;
}

}  // namespace keel::kv
