#include "keel/model/gguf_writer.h"

#include <cstring>
#include <fstream>
#include <memory>

#include "keel/util/error.h"

namespace keel::gguf {
namespace {

constexpr uint64_t kAlignment = 32;

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts only, as the reader
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_integer(std::string& out, ValueType t, int64_t v) {
  switch (t) {
    case ValueType::U8:
    case ValueType::BOOL: put<uint8_t>(out, static_cast<uint8_t>(v)); break;
    case ValueType::I8: put<int8_t>(out, static_cast<int8_t>(v)); break;
    case ValueType::U16: put<uint16_t>(out, static_cast<uint16_t>(v)); break;
    case ValueType::I16: put<int16_t>(out, static_cast<int16_t>(v)); break;
    case ValueType::U32: put<uint32_t>(out, static_cast<uint32_t>(v)); break;
    case ValueType::I32: put<int32_t>(out, static_cast<int32_t>(v)); break;
    case ValueType::U64: put<uint64_t>(out, static_cast<uint64_t>(v)); break;
    case ValueType::I64: put<int64_t>(out, v); break;
    default: break;
  }
}

void put_float(std::string& out, ValueType t, double v) {
  if (t == ValueType::F32)
    put<float>(out, static_cast<float>(v));
  else
    put<double>(out, v);
}

void put_value(std::string& out, const Value& v) {
  put<uint32_t>(out, static_cast<uint32_t>(v.type));
  switch (v.type) {
    case ValueType::STRING: put_string(out, v.text); return;
    case ValueType::F32:
    case ValueType::F64: put_float(out, v.type, v.number); return;
    case ValueType::ARRAY:
      put<uint32_t>(out, static_cast<uint32_t>(v.element_type));
      put<uint64_t>(out, v.array_size());
      for (const auto& s : v.texts) put_string(out, s);
      for (double d : v.numbers) put_float(out, v.element_type, d);
      for (int64_t i : v.integers) put_integer(out, v.element_type, i);
      return;
    default: put_integer(out, v.type, v.integer); return;
  }
}

void pad(std::string& out) { out.resize((out.size() + kAlignment - 1) / kAlignment * kAlignment, '\0'); }

}  // namespace

void Writer::set(std::string key, Value value) { metadata_.emplace_back(std::move(key), std::move(value)); }

void Writer::set_string(std::string key, std::string value) {
  Value v;
  v.type = ValueType::STRING;
  v.text = std::move(value);
  set(std::move(key), std::move(v));
}

namespace {
Value integer_value(ValueType t, int64_t i) {
  Value v;
  v.type = t;
  v.integer = i;
  return v;
}
}  // namespace

void Writer::set_uint32(std::string key, uint32_t value) { set(std::move(key), integer_value(ValueType::U32, value)); }
void Writer::set_int32(std::string key, int32_t value) { set(std::move(key), integer_value(ValueType::I32, value)); }
void Writer::set_bool(std::string key, bool value) { set(std::move(key), integer_value(ValueType::BOOL, value)); }

void Writer::set_float32(std::string key, float value) {
  Value v;
  v.type = ValueType::F32;
  v.number = value;
  set(std::move(key), std::move(v));
}

void Writer::set_strings(std::string key, std::vector<std::string> values) {
  Value v;
  v.type = ValueType::ARRAY;
  v.element_type = ValueType::STRING;
  v.texts = std::move(values);
  set(std::move(key), std::move(v));
}

void Writer::set_int32s(std::string key, const std::vector<int32_t>& values) {
  Value v;
  v.type = ValueType::ARRAY;
  v.element_type = ValueType::I32;
  v.integers.assign(values.begin(), values.end());
  set(std::move(key), std::move(v));
}

void Writer::set_float32s(std::string key, const std::vector<float>& values) {
  Value v;
  v.type = ValueType::ARRAY;
  v.element_type = ValueType::F32;
  v.numbers.assign(values.begin(), values.end());
  set(std::move(key), std::move(v));
}

void Writer::add_tensor(std::string name, std::vector<int64_t> dims, uint32_t type, std::string data) {
  const uint64_t size = data.size();
  add_tensor(std::move(name), std::move(dims), type, size,
             [data = std::make_shared<const std::string>(std::move(data))] { return *data; });
}

void Writer::add_tensor(std::string name, std::vector<int64_t> dims, uint32_t type, uint64_t bytes, Producer produce) {
  tensors_.push_back({std::move(name), std::move(dims), type, bytes, std::move(produce)});
}

std::string Writer::header() const {
  std::string out = "GGUF";
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    put_string(out, key);
    put_value(out, value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, t.type);
    put<uint64_t>(out, offset);
    offset = (offset + t.bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  pad(out);
  return out;
}

std::string Writer::data_of(const PendingTensor& t) {
  std::string data = t.produce();
  if (data.size() != t.bytes)
    throw InternalError("GGUF writer: tensor '" + t.name + "' produced " + std::to_string(data.size()) +
                        " bytes, declared " + std::to_string(t.bytes));
  pad(data);
  return data;
}

std::string Writer::bytes() const {
  std::string out = header();
  for (const PendingTensor& t : tensors_) out += data_of(t);
  return out;
}

void Writer::write(const std::filesystem::path& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const std::string h = header();
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const PendingTensor& t : tensors_) {
    if (!f) break;
    const std::string data = data_of(t);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  f.close();
  if (!f) throw Error(path.string() + ": cannot write the GGUF file (disk full?)");
}

}  // namespace keel::gguf
