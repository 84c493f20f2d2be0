#pragma once
// The safetensors container: an 8-byte little-endian header length, a JSON header mapping tensor
// names to {dtype, shape, data_offsets}, then the raw data. The parser trusts nothing: every
// offset, shape and size is checked against the file before any tensor is touched.
// Threads: the parse functions share no state (any thread). A SafetensorsFile is immutable after
// construction, so its const members may be called from many threads at once; the spans data() returns
// point into its mapping and live as long as the SafetensorsFile does.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "keel/model/dtype.h"
#include "keel/util/mapped_file.h"

namespace keel {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;

  uint64_t element_count() const;
  uint64_t byte_size() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in the order of their data offsets
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" block
  uint64_t data_start = 0;  // absolute offset of the data section (8 + header length)
  uint64_t file_size = 0;

  const TensorInfo* find(std::string_view name) const;
  uint64_t data_bytes() const { return file_size - data_start; }
};

// Parses and validates the header. `prefix` holds the file's first bytes (at least the whole
// header), `file_size` the full size, `label` names the file in error messages.
// Throws keel::Error on anything malformed or truncated.
SafetensorsHeader parse_safetensors_header(std::span<const uint8_t> prefix, uint64_t file_size,
                                           std::string_view label);

// Reads only the header of a file on disk (for planning without mapping the weights).
SafetensorsHeader read_safetensors_header(const std::filesystem::path& path);

// A mapped safetensors file whose tensors are used in place.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);

  const SafetensorsHeader& header() const { return header_; }
  const std::filesystem::path& path() const { return file_.path(); }
  std::span<const uint8_t> data(const TensorInfo& t) const;

 private:
  MappedFile file_;
  SafetensorsHeader header_;
};

}  // namespace keel
