#pragma once
// The identities that keep one model's (policy's, rotation's, machine's) blocks on disk from ever
// being read by another.
//
// Pure functions of files and values: any thread.
#include <cstdint>
#include <filesystem>
#include <string>

#include "keel/kv/kv_block_layout.h"
#include "keel/model/model_files.h"

namespace keel::kv {

// A hash of a model's weights as stored: config.json, and for every *.safetensors file (in name
// order) or GGUF shard its name, size, whole header (a GGUF's metadata and tensor infos), and 16
// samples of 4 KiB spread over its data (the first at the data's start). Another model, another
// quantization or a fine-tune of the same shape (same headers and sizes, other values) gets another
// identity; reading is a few pages per file. Throws keel::Error when the folder has no weights or a
// file cannot be read.
uint64_t kv_model_identity(const ModelFiles& model);

// The running keel build: a hash of its executable (/proc/self/exe; the version string where that
// cannot be read). Another build may round a kernel differently, so its rows are another's.
// Computed once (a few ms), then cached.
uint64_t kv_build_identity();

// The namespace a pool's blocks are stored under: the model identity, the pool's layout (layer
// groups, heads, head dims, windows), its chain root (policy and rotation: kv_chain_root), the
// block size, the disk format's version, the build (kv_build_identity) and the SIMD target the
// kernels run (rows computed on a CPU that picks another target can differ in their last bits,
// docs/kv-cache.md).
uint64_t kv_disk_namespace(uint64_t model_identity, const KvBlockLayout& layout, uint64_t chain_root);

// The folder name of a namespace: 16 hex digits.
std::string kv_disk_namespace_name(uint64_t namespace_key);

}  // namespace keel::kv
