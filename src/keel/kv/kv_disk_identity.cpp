#include "keel/kv/kv_disk_identity.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <span>
#include <string_view>
#include <vector>

#include "keel/kv/kv_disk_block.h"
#include "keel/kv/kv_window.h"
#include "keel/ops/simd_kernels.h"
#include "keel/util/error.h"

namespace keel::kv {
namespace {

constexpr uint64_t kSamples = 16;
constexpr uint64_t kSampleBytes = 4096;
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // as the safetensors reader allows

uint64_t fold(uint64_t h, std::span<const uint8_t> bytes) {
  const uint64_t both[2] = {h, kv_disk_checksum(bytes)};
  return kv_disk_checksum(std::span(reinterpret_cast<const uint8_t*>(both), sizeof both));
}

uint64_t fold(uint64_t h, std::string_view text) {
  return fold(h, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

uint64_t fold(uint64_t h, uint64_t value) {
  uint8_t bytes[8];
  std::memcpy(bytes, &value, 8);
  return fold(h, std::span<const uint8_t>(bytes, 8));
}

std::vector<uint8_t> read_at(std::ifstream& in, uint64_t offset, uint64_t n, const std::filesystem::path& path) {
  std::vector<uint8_t> bytes(n);
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(n)))
    throw Error("KV disk tier: cannot read " + std::to_string(n) + " bytes at " + std::to_string(offset) + " of " +
                path.string());
  return bytes;
}

}  // namespace

uint64_t kv_model_identity(const ModelFiles& model) {
  // Each weight file, and where its data starts: a GGUF's shards after their metadata and tensor
  // infos, a folder's safetensors after their JSON header.
  std::vector<std::pair<std::filesystem::path, uint64_t>> weights;
  for (const auto& shard : model.gguf)
    weights.emplace_back(shard->path(), std::min(shard->header().data_start, kMaxHeaderBytes));
  if (!model.is_gguf()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(model.path, ec))
      if (entry.is_regular_file() && entry.path().extension() == ".safetensors") weights.emplace_back(entry.path(), 0);
    if (ec) throw Error("KV disk tier: cannot list the model folder " + model.path.string() + ": " + ec.message());
    if (weights.empty()) throw Error("KV disk tier: no *.safetensors in " + model.path.string());
    std::sort(weights.begin(), weights.end());
  }

  uint64_t h = fold(0, std::string_view("keel model identity 1"));
  if (std::ifstream config(model.config_json, std::ios::binary); config) {  // none for GGUF
    const std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
    h = fold(h, text);
  }
  for (const auto& [path, gguf_data_start] : weights) {
    const uint64_t size = std::filesystem::file_size(path);
    std::ifstream in(path, std::ios::binary);
    if (!in || size < 8) throw Error("KV disk tier: cannot read the weights " + path.string());
    h = fold(fold(h, path.filename().string()), size);
    uint64_t data_start = gguf_data_start;
    if (data_start) {  // GGUF: the metadata and tensor infos
      h = fold(h, read_at(in, 0, data_start, path));
    } else {
      const std::vector<uint8_t> length = read_at(in, 0, 8, path);
      uint64_t header = 0;
      std::memcpy(&header, length.data(), 8);
      header = std::min({header, size - 8, kMaxHeaderBytes});
      h = fold(h, read_at(in, 8, header, path));
      data_start = 8 + header;
    }
    const uint64_t data = size - data_start;
    for (uint64_t i = 0; i < kSamples && data > 0; ++i) {
      const uint64_t at = data_start + (data - std::min(data, kSampleBytes)) / (kSamples - 1) * i;
      h = fold(h, read_at(in, at, std::min(kSampleBytes, size - at), path));
    }
  }
  return h;
}

uint64_t kv_build_identity() {
  static const uint64_t identity = [] {
    uint64_t h = fold(0, std::string_view("keel build " KEEL_VERSION));
    std::ifstream exe("/proc/self/exe", std::ios::binary);
    std::vector<uint8_t> chunk(size_t{1} << 20);
    while (exe) {
      exe.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
      const auto n = static_cast<size_t>(exe.gcount());
      if (n == 0) break;
      h = fold(h, std::span<const uint8_t>(chunk.data(), n));
    }
    return h;
  }();
  return identity;
}

uint64_t kv_disk_namespace(uint64_t model_identity, const KvBlockLayout& layout, uint64_t chain_root) {
  uint64_t h = fold(fold(fold(0, std::string_view("keel kv disk namespace 1")), model_identity), chain_root);
  h = fold(h, kv_build_identity());
  h = fold(fold(h, static_cast<uint64_t>(kKvBlockTokens)), std::string_view(ops::simd_target_name()));
  h = fold(h, static_cast<uint64_t>(layout.layers()));
  for (const KvLayerGroup& g : layout.groups()) {
    for (int64_t v : {static_cast<int64_t>(g.attention), g.window, g.kv_heads, g.head_dim})
      h = fold(h, static_cast<uint64_t>(v));
    for (int64_t layer : g.layers) h = fold(h, static_cast<uint64_t>(layer));
  }
  return h;
}

std::string kv_disk_namespace_name(uint64_t namespace_key) {
  char name[20];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(namespace_key));
  return name;
}

}  // namespace keel::kv
