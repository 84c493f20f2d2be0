#include "keel/model/gguf_file.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <set>

#include "keel/util/error.h"

namespace keel::gguf {
namespace {

// ggml.h's type numbering and ggml-common.h's block sizes; ids 4, 5 and 31-33 were retired.
constexpr std::array kTypes = {
    GgmlType{0, "F32", 1, 4},           GgmlType{1, "F16", 1, 2},        GgmlType{2, "Q4_0", 32, 18},
    GgmlType{3, "Q4_1", 32, 20},        GgmlType{6, "Q5_0", 32, 22},     GgmlType{7, "Q5_1", 32, 24},
    GgmlType{8, "Q8_0", 32, 34},        GgmlType{9, "Q8_1", 32, 36},     GgmlType{10, "Q2_K", 256, 84},
    GgmlType{11, "Q3_K", 256, 110},     GgmlType{12, "Q4_K", 256, 144},  GgmlType{13, "Q5_K", 256, 176},
    GgmlType{14, "Q6_K", 256, 210},     GgmlType{15, "Q8_K", 256, 292},  GgmlType{16, "IQ2_XXS", 256, 66},
    GgmlType{17, "IQ2_XS", 256, 74},    GgmlType{18, "IQ3_XXS", 256, 98}, GgmlType{19, "IQ1_S", 256, 50},
    GgmlType{20, "IQ4_NL", 32, 18},     GgmlType{21, "IQ3_S", 256, 110}, GgmlType{22, "IQ2_S", 256, 82},
    GgmlType{23, "IQ4_XS", 256, 136},   GgmlType{24, "I8", 1, 1},        GgmlType{25, "I16", 1, 2},
    GgmlType{26, "I32", 1, 4},          GgmlType{27, "I64", 1, 8},       GgmlType{28, "F64", 1, 8},
    GgmlType{29, "IQ1_M", 256, 56},     GgmlType{30, "BF16", 1, 2},      GgmlType{34, "TQ1_0", 256, 54},
    GgmlType{35, "TQ2_0", 256, 66},     GgmlType{39, "MXFP4", 32, 17},
};

constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// A bounds-checked cursor over the file's bytes. Every read says what it was reading, so a
// truncated file's error names the key or tensor it stopped in.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, std::string_view label) : bytes_(bytes), label_(label) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(std::string(label_) + ": " + where + ": " + what);
  }

  template <typename T>
  T read(const std::string& where) {
    if (left() < sizeof(T))
      fail(where, "the file ends at byte " + std::to_string(bytes_.size()) + " (truncated file?)");
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));  // GGUF is little-endian, as every host keel runs on
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& where) {
    const uint64_t n = read<uint64_t>(where);
    if (n > left())
      fail(where, "a string of " + std::to_string(n) + " bytes runs past the end of the file at byte " +
                      std::to_string(bytes_.size()) + " (truncated file?)");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  std::string_view label_;
  uint64_t pos_ = 0;
};

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64: return 8;
    case ValueType::STRING: return 8;  // at least its length
    case ValueType::ARRAY: return 12;  // at least its element type and count
  }
  return 0;
}

bool known_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::F64); }

bool integer_type(ValueType t) {
  return t != ValueType::F32 && t != ValueType::F64 && t != ValueType::STRING && t != ValueType::ARRAY;
}

// One integer scalar of type `t`, widened to int64.
int64_t read_integer(Reader& r, ValueType t, const std::string& where) {
  switch (t) {
    case ValueType::U8: return r.read<uint8_t>(where);
    case ValueType::I8: return r.read<int8_t>(where);
    case ValueType::BOOL: {
      const uint8_t b = r.read<uint8_t>(where);
      if (b > 1) r.fail(where, "a bool holds " + std::to_string(b) + " (must be 0 or 1)");
      return b;
    }
    case ValueType::U16: return r.read<uint16_t>(where);
    case ValueType::I16: return r.read<int16_t>(where);
    case ValueType::U32: return r.read<uint32_t>(where);
    case ValueType::I32: return r.read<int32_t>(where);
    case ValueType::I64: return r.read<int64_t>(where);
    case ValueType::U64: {
      const uint64_t v = r.read<uint64_t>(where);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        r.fail(where, "the value " + std::to_string(v) + " is out of range");
      return static_cast<int64_t>(v);
    }
    default: return 0;
  }
}

double read_float(Reader& r, ValueType t, const std::string& where) {
  return t == ValueType::F32 ? static_cast<double>(r.read<float>(where)) : r.read<double>(where);
}

ValueType read_value_type(Reader& r, const std::string& where) {
  const uint32_t t = r.read<uint32_t>(where);
  if (!known_type(t)) r.fail(where, "unknown value type " + std::to_string(t));
  return static_cast<ValueType>(t);
}

Value read_value(Reader& r, ValueType type, const std::string& where) {
  Value v;
  v.type = type;
  if (type == ValueType::STRING) {
    v.text = r.read_string(where);
  } else if (type == ValueType::F32 || type == ValueType::F64) {
    v.number = read_float(r, type, where);
  } else if (type != ValueType::ARRAY) {
    v.integer = read_integer(r, type, where);
  } else {
    v.element_type = read_value_type(r, where + " (array element type)");
    if (v.element_type == ValueType::ARRAY) r.fail(where, "arrays of arrays are not supported");
    const uint64_t n = r.read<uint64_t>(where);
    // Each element takes at least scalar_size bytes, so a count the file cannot hold is refused
    // before anything is allocated for it.
    if (n > r.left() / scalar_size(v.element_type))
      r.fail(where, "an array of " + std::to_string(n) + " " + std::string(value_type_name(v.element_type)) +
                        " values runs past the end of the file (truncated file?)");
    const auto count = static_cast<size_t>(n);
    if (v.element_type == ValueType::STRING) {
      v.texts.reserve(count);
      for (size_t i = 0; i < count; ++i) v.texts.push_back(r.read_string(where + "[" + std::to_string(i) + "]"));
    } else if (v.element_type == ValueType::F32 || v.element_type == ValueType::F64) {
      v.numbers.reserve(count);
      for (size_t i = 0; i < count; ++i) v.numbers.push_back(read_float(r, v.element_type, where));
    } else {
      v.integers.reserve(count);
      for (size_t i = 0; i < count; ++i) v.integers.push_back(read_integer(r, v.element_type, where));
    }
  }
  return v;
}

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Tensor read_tensor_info(Reader& r, size_t index) {
  const std::string at = "tensor info " + std::to_string(index);
  Tensor t;
  t.name = r.read_string(at + " (name)");
  const std::string where = "tensor '" + t.name + "'";
  const uint32_t n_dims = r.read<uint32_t>(where);
  if (n_dims == 0 || n_dims > kMaxDims)
    r.fail(where, std::to_string(n_dims) + " dimensions (ggml allows 1 to " + std::to_string(kMaxDims) + ")");
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t n = r.read<uint64_t>(where);
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) r.fail(where, "dimension out of range");
    t.dims.push_back(static_cast<int64_t>(n));
  }
  const uint32_t type = r.read<uint32_t>(where);
  t.type = ggml_type(type);
  if (!t.type) r.fail(where, "unknown ggml type " + std::to_string(type));
  t.offset = r.read<uint64_t>(where);

  // Elements and bytes, refusing overflow: a hostile dimension must not wrap into a small size.
  uint64_t elements = 1;
  for (int64_t d : t.dims) {
    if (d != 0 && elements > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      r.fail(where, "dimensions " + dims_string(t.dims) + " overflow");
    elements *= static_cast<uint64_t>(d);
  }
  if (t.dims[0] % t.type->block_elements != 0)
    r.fail(where, "innermost dimension " + std::to_string(t.dims[0]) + " is not a multiple of " +
                      std::string(t.type->name) + "'s block of " + std::to_string(t.type->block_elements));
  const uint64_t blocks = elements / static_cast<uint64_t>(t.type->block_elements);
  if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(t.type->block_bytes))
    r.fail(where, "dimensions " + dims_string(t.dims) + " overflow");
  t.bytes = blocks * static_cast<uint64_t>(t.type->block_bytes);
  return t;
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "?";
}

bool Value::is_integer() const { return integer_type(type); }

size_t Value::array_size() const { return texts.size() + integers.size() + numbers.size(); }

const GgmlType* ggml_type(uint32_t id) {
  for (const GgmlType& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const Value* Header::find(std::string_view key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const Tensor* Header::find_tensor(std::string_view name) const {
  for (const Tensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Header parse_header(std::span<const uint8_t> file, std::string_view label) {
  Reader r(file, label);
  Header h;
  h.file_size = file.size();
  if (file.size() < 4 || std::memcmp(file.data(), "GGUF", 4) != 0) r.fail("header", "not a GGUF file (no \"GGUF\" magic)");
  (void)r.read<uint32_t>("header");
  h.version = r.read<uint32_t>("header (version)");
  if (h.version != 2 && h.version != 3)
    r.fail("header", "GGUF version " + std::to_string(h.version) + " is not supported (2 or 3)");
  const uint64_t tensor_count = r.read<uint64_t>("header (tensor count)");
  const uint64_t kv_count = r.read<uint64_t>("header (metadata count)");
  // Each key/value takes at least 12 bytes, each tensor info at least 28.
  if (kv_count > r.left() / 12) r.fail("header", std::to_string(kv_count) + " metadata entries cannot fit in the file");
  if (tensor_count > r.left() / 28) r.fail("header", std::to_string(tensor_count) + " tensors cannot fit in the file");

  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = r.read_string("metadata entry " + std::to_string(i) + " (key)");
    const std::string where = "key '" + key + "'";
    const ValueType type = read_value_type(r, where);
    Value v = read_value(r, type, where);
    if (!h.metadata.emplace(std::move(key), std::move(v)).second) r.fail(where, "appears twice");
  }

  if (const Value* a = h.find("general.alignment")) {
    if (!a->is_integer() || a->type == ValueType::BOOL || a->integer <= 0 || (a->integer & (a->integer - 1)) != 0)
      r.fail("key 'general.alignment'", "must be a positive power of two");
    h.alignment = static_cast<uint64_t>(a->integer);
  }

  std::set<std::string_view> names;
  h.tensors.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) h.tensors.push_back(read_tensor_info(r, static_cast<size_t>(i)));

  h.data_start = (r.pos() + h.alignment - 1) / h.alignment * h.alignment;
  if (h.data_start > h.file_size && tensor_count > 0)
    r.fail("header", "the data section would start at byte " + std::to_string(h.data_start) +
                         " past the end of the file (truncated file?)");
  const uint64_t data_bytes = h.data_start <= h.file_size ? h.file_size - h.data_start : 0;
  for (const Tensor& t : h.tensors) {
    const std::string where = "tensor '" + t.name + "'";
    if (!names.insert(t.name).second) r.fail(where, "appears twice");
    if (t.offset % h.alignment != 0)
      r.fail(where, "offset " + std::to_string(t.offset) + " is not aligned to " + std::to_string(h.alignment));
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      r.fail(where, "data ends at byte " + std::to_string(h.data_start + t.offset + t.bytes) + " but the file has " +
                        std::to_string(h.file_size) + " (truncated file?)");
  }
  return h;
}

File::File(const std::filesystem::path& path) : file_(path), header_(parse_header(file_.bytes(), path.string())) {}

std::span<const uint8_t> File::data(const Tensor& t) const {
  return file_.bytes().subspan(static_cast<size_t>(header_.data_start + t.offset), static_cast<size_t>(t.bytes));
}

void File::fail(std::string_view key, const std::string& problem) const {
  throw Error(path().string() + ": key '" + std::string(key) + "': " + problem);
}

std::optional<int64_t> File::optional_int(std::string_view key) const {
  const Value* v = header_.find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) fail(key, "is a " + std::string(value_type_name(v->type)) + ", expected an integer");
  return v->integer;
}

std::optional<double> File::optional_number(std::string_view key) const {
  const Value* v = header_.find(key);
  if (!v) return std::nullopt;
  if (!v->is_number() || v->type == ValueType::BOOL)
    fail(key, "is a " + std::string(value_type_name(v->type)) + ", expected a number");
  return v->as_double();
}

std::optional<std::string> File::optional_string(std::string_view key) const {
  const Value* v = header_.find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) fail(key, "is a " + std::string(value_type_name(v->type)) + ", expected a string");
  return v->text;
}

std::optional<bool> File::optional_bool(std::string_view key) const {
  const Value* v = header_.find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) fail(key, "is a " + std::string(value_type_name(v->type)) + ", expected a bool");
  return v->integer != 0;
}

int64_t File::require_int(std::string_view key, std::string_view why) const {
  if (auto v = optional_int(key)) return *v;
  throw Error(path().string() + ": missing key '" + std::string(key) + "' (" + std::string(why) + ")");
}

std::string File::require_string(std::string_view key, std::string_view why) const {
  if (auto v = optional_string(key)) return *v;
  throw Error(path().string() + ": missing key '" + std::string(key) + "' (" + std::string(why) + ")");
}

namespace {
const Value* array_of(const File& f, std::string_view key, bool (*kind)(ValueType), std::string_view expected) {
  const Value* v = f.header().find(key);
  if (!v) return nullptr;
  if (v->type != ValueType::ARRAY || !kind(v->element_type))
    f.fail(key, "is not an array of " + std::string(expected));
  return v;
}
}  // namespace

const std::vector<std::string>* File::string_array(std::string_view key) const {
  const Value* v = array_of(*this, key, [](ValueType t) { return t == ValueType::STRING; }, "strings");
  return v ? &v->texts : nullptr;
}

const std::vector<int64_t>* File::int_array(std::string_view key) const {
  const Value* v = array_of(*this, key, integer_type, "integers");
  return v ? &v->integers : nullptr;
}

const std::vector<double>* File::number_array(std::string_view key) const {
  const Value* v = array_of(*this, key, [](ValueType t) { return t == ValueType::F32 || t == ValueType::F64; }, "floats");
  return v ? &v->numbers : nullptr;
}

}  // namespace keel::gguf
