#pragma once
// The GGUF container (llama.cpp's model file): a little-endian header ("GGUF", version 2 or 3,
// tensor and key/value counts), typed metadata key/values (scalars, strings, arrays), tensor infos
// (name, ggml dimensions innermost first, ggml type, offset into the data section), then the data
// section, aligned to general.alignment (32 by default). Tensors are used in place from the
// memory mapping.
//
// The parser trusts nothing: every length, count, offset and size is checked against the file
// before it is used, and a failure names the file and the key or tensor, e.g.
//   "model.gguf: tensor 'blk.3.ffn_up.weight': data ends at byte 9123456 but the file has 8000000".
// Parsed once, then read-only: safe to read from any thread.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "keel/util/mapped_file.h"

namespace keel::gguf {

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Integers (and bools) are held as int64 (a U64 above INT64_MAX is refused at
// parse time), floats as double; arrays keep their element type and hold their elements in the
// matching vector. Arrays of arrays are refused (no model file writes them).
struct Value {
  ValueType type = ValueType::U8;
  ValueType element_type = ValueType::U8;  // ARRAY only
  int64_t integer = 0;                     // U8..I64, BOOL
  double number = 0;                       // F32, F64
  std::string text;                        // STRING
  std::vector<int64_t> integers;           // ARRAY of U8..I64 or BOOL
  std::vector<double> numbers;             // ARRAY of F32 or F64
  std::vector<std::string> texts;          // ARRAY of STRING

  bool is_integer() const;  // U8..I64 or BOOL
  bool is_number() const { return is_integer() || type == ValueType::F32 || type == ValueType::F64; }
  double as_double() const { return is_integer() ? static_cast<double>(integer) : number; }
  size_t array_size() const;
};

// The ggml element types a tensor may have (ggml.h's numbering), with their block geometry.
struct GgmlType {
  uint32_t id;
  std::string_view name;  // "Q4_K"
  int block_elements;     // elements per block (1 for plain types)
  int block_bytes;
};
// nullptr for an id ggml does not define.
const GgmlType* ggml_type(uint32_t id);

struct Tensor {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the innermost (contiguous) dimension
  const GgmlType* type = nullptr;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;

  int64_t elements() const;
  // Hugging Face order (outermost first), as keel's shapes are written: {rows, cols} for a matrix.
  std::vector<int64_t> shape() const { return {dims.rbegin(), dims.rend()}; }
};

// A parsed header: metadata and tensor infos, without the data.
struct Header {
  uint32_t version = 0;
  std::map<std::string, Value, std::less<>> metadata;
  std::vector<Tensor> tensors;  // in file order
  uint64_t alignment = 32;
  uint64_t data_start = 0;  // absolute offset of the data section
  uint64_t file_size = 0;

  const Value* find(std::string_view key) const;
  const Tensor* find_tensor(std::string_view name) const;
};

// Parses and validates a whole file's bytes (the mapping, or a fuzzer's input); `label` names the
// file in errors. Throws keel::Error for anything malformed, truncated or out of bounds.
Header parse_header(std::span<const uint8_t> file, std::string_view label);

// A mapped GGUF file whose tensors are used in place.
class File {
 public:
  explicit File(const std::filesystem::path& path);

  const Header& header() const { return header_; }
  const std::filesystem::path& path() const { return file_.path(); }
  std::span<const uint8_t> data(const Tensor& t) const;
  // Bytes of this file's tensors that were copied elsewhere and will not be read here again
  // (MappedFile::release; bytes of other files are ignored).
  void release(std::span<const uint8_t> bytes) const { file_.release(bytes); }

  // Metadata accessors; each throws keel::Error naming the file and key when the value is
  // missing (require_*) or of the wrong type.
  std::optional<int64_t> optional_int(std::string_view key) const;
  std::optional<double> optional_number(std::string_view key) const;
  std::optional<std::string> optional_string(std::string_view key) const;
  std::optional<bool> optional_bool(std::string_view key) const;
  int64_t require_int(std::string_view key, std::string_view why) const;
  std::string require_string(std::string_view key, std::string_view why) const;
  // An array value of the given kind; nullptr when absent.
  const std::vector<std::string>* string_array(std::string_view key) const;
  const std::vector<int64_t>* int_array(std::string_view key) const;
  const std::vector<double>* number_array(std::string_view key) const;

  [[noreturn]] void fail(std::string_view key, const std::string& problem) const;

 private:
  MappedFile file_;
  Header header_;
};

}  // namespace keel::gguf
