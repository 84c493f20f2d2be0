#include "keel/plan/weight_storage.h"

#include "keel/util/error.h"

namespace keel::plan {
namespace {

using arch::CheckpointTensor;

constexpr int64_t kMxfp4Block = 32;  // weights per e8m0 scale

uint64_t u64(int64_t n) { return static_cast<uint64_t>(n); }

// The bits and group a matrix gets in an MLX format; bits 0: stored unquantized.
MlxQuantization mlx_for(const CheckpointTensor& t, const StorageFormat& f, const MlxOverrides& overrides) {
  MlxQuantization q{f.bits, f.group_size, "affine"};
  if (auto it = overrides.find(t.name); it != overrides.end()) q = it->second;
  // mlx-lm leaves a linear whose input size the group does not divide unquantized.
  if (q.bits && t.shape.back() % q.group_size != 0) q.bits = 0;
  return q;
}

// The shape with its last dimension replaced.
std::vector<int64_t> with_last(std::vector<int64_t> shape, int64_t last) {
  shape.back() = last;
  return shape;
}

int64_t leading(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
  return n;
}

unsigned storage_of(const CheckpointTensor& t, const StorageFormat& f, const MlxOverrides& overrides) {
  switch (f.kind) {
    case StorageFormat::Kind::Float: return arch::kStoredFloat;
    case StorageFormat::Kind::MlxAffine: return mlx_for(t, f, overrides).bits ? arch::kStoredMlxAffine : arch::kStoredFloat;
    case StorageFormat::Kind::Mxfp4:
      return (t.loads_as & arch::kStoredMxfp4) && t.shape.back() % kMxfp4Block == 0 ? arch::kStoredMxfp4
                                                                                    : arch::kStoredFloat;
  }
  return arch::kStoredFloat;
}

}  // namespace

std::string StorageFormat::name() const {
  switch (kind) {
    case Kind::Float: return float_bytes == 4 ? "f32" : f16 ? "f16" : "bf16";
    case Kind::MlxAffine: return "mlx" + std::to_string(bits) + "-g" + std::to_string(group_size);
    case Kind::Mxfp4: return "mxfp4";
  }
  return "?";
}

StorageFormat parse_storage_format(const std::string& text) {
  StorageFormat f;
  if (text == "bf16") return f;
  if (text == "f16") return {StorageFormat::Kind::Float, 2, true};
  if (text == "f32") return {StorageFormat::Kind::Float, 4};
  if (text == "mxfp4") return {StorageFormat::Kind::Mxfp4};
  if (text.rfind("mlx", 0) == 0) {
    const std::string rest = text.substr(3);
    const size_t dash = rest.find("-g");
    const std::string bits = rest.substr(0, dash);
    const std::string group = dash == std::string::npos ? "64" : rest.substr(dash + 2);
    if ((bits == "4" || bits == "8") && (group == "32" || group == "64" || group == "128"))
      return {StorageFormat::Kind::MlxAffine, 2, false, std::stoi(bits), std::stoi(group)};
  }
  if (text.rfind("gguf", 0) == 0 || text.rfind("q4_", 0) == 0 || text.rfind("q8_", 0) == 0 ||
      text.rfind("Q4_", 0) == 0 || text.rfind("Q8_", 0) == 0)
    throw Error("--weights " + text + ": GGUF formats are not computed from shapes; plan the .gguf file itself "
                "(keel plan FILE.gguf reads its tensor infos)");
  throw Error("--weights " + text +
              ": unknown weight format (bf16, f16, f32, mlx4, mlx8, mlx4-g32, mlx4-g64, mlx4-g128, mlx8-g32, "
              "mlx8-g64, mlx8-g128, mxfp4)");
}

std::vector<StorageFormat> table_formats(const std::vector<CheckpointTensor>& tensors) {
  std::vector<StorageFormat> out{StorageFormat{}};
  for (int bits : {8, 4})
    for (int group : {32, 64, 128}) out.push_back({StorageFormat::Kind::MlxAffine, 2, false, bits, group});
  for (const CheckpointTensor& t : tensors) {
    if (t.matrix && (t.loads_as & arch::kStoredMxfp4)) {
      out.push_back({StorageFormat::Kind::Mxfp4});
      break;
    }
  }
  return out;
}

std::vector<StoredTensor> stored_tensors(const std::vector<CheckpointTensor>& tensors, const StorageFormat& f,
                                         const MlxOverrides& overrides) {
  std::vector<StoredTensor> out;
  const uint64_t fb = u64(f.float_bytes);
  for (const CheckpointTensor& t : tensors) {
    const uint64_t elements = u64(t.elements());
    if (!t.matrix) {
      out.push_back({t.name, t.shape, elements * fb, t.elements(), arch::kStoredFloat});
      continue;
    }
    const std::string weight = t.weight_suffix ? t.name + ".weight" : t.name;
    const int64_t cols = t.shape.back();
    const uint64_t rows = u64(leading(t.shape));
    switch (storage_of(t, f, overrides)) {
      case arch::kStoredMlxAffine: {
        const MlxQuantization q = mlx_for(t, f, overrides);
        const int64_t words = cols * q.bits / 32, groups = cols / q.group_size;
        out.push_back({weight, with_last(t.shape, words), rows * u64(words) * 4, t.elements(), arch::kStoredMlxAffine});
        for (const char* part : {".scales", ".biases"})
          out.push_back({t.name + part, with_last(t.shape, groups), rows * u64(groups) * fb, 0, arch::kStoredMlxAffine});
        break;
      }
      case arch::kStoredMxfp4: {
        const int64_t blocks = cols / kMxfp4Block;
        std::vector<int64_t> block_shape = with_last(t.shape, blocks);
        std::vector<int64_t> code_shape = block_shape;
        code_shape.push_back(kMxfp4Block / 2);
        out.push_back({t.name + "_blocks", code_shape, rows * u64(blocks) * (kMxfp4Block / 2), t.elements(),
                       arch::kStoredMxfp4});
        out.push_back({t.name + "_scales", block_shape, rows * u64(blocks), 0, arch::kStoredMxfp4});
        break;
      }
      default: out.push_back({weight, t.shape, elements * fb, t.elements(), arch::kStoredFloat});
    }
  }
  return out;
}

std::optional<std::string> unloadable_reason(const std::vector<CheckpointTensor>& tensors, const StorageFormat& f,
                                             const MlxOverrides& overrides) {
  auto storage_name = [](unsigned s) {
    return s == arch::kStoredMxfp4 ? "MXFP4" : s == arch::kStoredMlxAffine ? "MLX affine" : "unquantized";
  };
  for (const CheckpointTensor& t : tensors) {
    if (!t.matrix) continue;
    const unsigned s = storage_of(t, f, overrides);
    if (t.loads_as & s) continue;
    if (!t.loads_as) return "keel has no loader for this architecture";
    return "keel's loader does not read " + t.name + " " + storage_name(s) + " (only " +
           storage_name(t.loads_as & arch::kStoredMxfp4     ? arch::kStoredMxfp4
                        : t.loads_as & arch::kStoredFloat ? arch::kStoredFloat
                                                          : arch::kStoredMlxAffine) +
           ")";
  }
  return std::nullopt;
}

}  // namespace keel::plan
