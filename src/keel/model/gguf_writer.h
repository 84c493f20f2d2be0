#pragma once
// Writes GGUF files (version 3): metadata in the order it is set, tensor infos, then the data
// section, each tensor aligned to general.alignment (32). `keel synth --format gguf` writes its
// models with it, and the tests build damaged files from it. The reader is gguf_file.h.
//
// A tensor's bytes may be given up front or produced when write() reaches it, so a file larger
// than memory (a slice of a 30B MoE) is written holding one tensor at a time.
//
// Not thread-safe; one writer per file.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "keel/model/gguf_file.h"

namespace keel::gguf {

class Writer {
 public:
  void set(std::string key, Value value);
  void set_string(std::string key, std::string value);
  void set_uint32(std::string key, uint32_t value);
  void set_int32(std::string key, int32_t value);
  void set_float32(std::string key, float value);
  void set_bool(std::string key, bool value);
  void set_strings(std::string key, std::vector<std::string> values);
  void set_int32s(std::string key, const std::vector<int32_t>& values);
  void set_float32s(std::string key, const std::vector<float>& values);

  // `dims` in ggml order (innermost first); `data` is the tensor's bytes in `type`'s layout.
  void add_tensor(std::string name, std::vector<int64_t> dims, uint32_t type, std::string data);
  // The same, with the data produced on demand: `produce` is called once, in the order tensors
  // were added, and must return exactly `bytes` bytes (keel::InternalError otherwise).
  using Producer = std::function<std::string()>;
  void add_tensor(std::string name, std::vector<int64_t> dims, uint32_t type, uint64_t bytes, Producer produce);

  // The whole file (produces every tensor).
  std::string bytes() const;
  // Writes the file to `path`, one tensor in memory at a time; throws keel::Error naming it on
  // failure.
  void write(const std::filesystem::path& path) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> dims;
    uint32_t type;
    uint64_t bytes;
    Producer produce;
  };
  // Everything before the data section: magic, counts, metadata, tensor infos, padding.
  std::string header() const;
  // `produce` of tensor `t`, its size checked.
  static std::string data_of(const PendingTensor& t);
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace keel::gguf
