#include "keel/model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "keel/util/error.h"

namespace keel {
namespace {

// The format's own limit; also keeps a corrupt length from asking for gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

[[noreturn]] void fail(std::string_view label, const std::string& what) {
  throw Error(std::string(label) + ": " + what);
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

TensorInfo parse_entry(std::string_view label, const std::string& name, const nlohmann::json& e,
                       uint64_t data_bytes) {
  auto bad = [&](const std::string& what) { fail(label, "tensor '" + name + "': " + what); };
  if (!e.is_object()) bad("header entry is not an object");
  TensorInfo t;
  t.name = name;

  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) bad("missing dtype");
  auto parsed = dtype_from_name(dt->get<std::string>());
  if (!parsed) bad("unknown dtype '" + dt->get<std::string>() + "'");
  t.dtype = *parsed;

  auto shape = e.find("shape");
  if (shape == e.end() || !shape->is_array()) bad("missing shape");
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) bad("shape has a non-integer or negative dimension");
    t.shape.push_back(d.get<int64_t>());
  }

  auto offs = e.find("data_offsets");
  if (offs == e.end() || !offs->is_array() || offs->size() != 2 || !(*offs)[0].is_number_unsigned() ||
      !(*offs)[1].is_number_unsigned())
    bad("data_offsets must be two non-negative integers");
  t.begin = (*offs)[0].get<uint64_t>();
  t.end = (*offs)[1].get<uint64_t>();
  if (t.begin > t.end) bad("data_offsets are reversed");
  if (t.end > data_bytes)
    bad("data ends at byte " + std::to_string(t.end) + " but the file holds only " +
        std::to_string(data_bytes) + " data bytes (truncated file?)");

  uint64_t elements = 1;
  for (int64_t d : t.shape) {
    if (d != 0 && elements > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      bad("shape overflows");
    elements *= static_cast<uint64_t>(d);
  }
  uint64_t size = dtype_size(t.dtype);
  if (elements > std::numeric_limits<uint64_t>::max() / size || elements * size != t.byte_size())
    bad("shape and dtype need " + std::to_string(elements) + " x " + std::to_string(size) +
        " bytes but data_offsets span " + std::to_string(t.byte_size()));
  return t;
}

}  // namespace

uint64_t TensorInfo::element_count() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

const TensorInfo* SafetensorsHeader::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsHeader parse_safetensors_header(std::span<const uint8_t> prefix, uint64_t file_size,
                                           std::string_view label) {
  if (file_size < 8 || prefix.size() < 8) fail(label, "truncated safetensors header (file shorter than 8 bytes)");
  uint64_t header_len = read_le64(prefix.data());
  if (header_len > kMaxHeaderBytes) fail(label, "safetensors header length " + std::to_string(header_len) + " is implausible");
  if (8 + header_len > file_size)
    fail(label, "truncated safetensors header: it declares " + std::to_string(header_len) +
                    " bytes but the file has " + std::to_string(file_size));
  if (8 + header_len > prefix.size()) fail(label, "truncated safetensors header");

  SafetensorsHeader h;
  h.data_start = 8 + header_len;
  h.file_size = file_size;

  const char* text = reinterpret_cast<const char*>(prefix.data() + 8);
  nlohmann::json j = nlohmann::json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(label, "safetensors header is not valid JSON");
  if (!j.is_object()) fail(label, "safetensors header is not a JSON object");

  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(label, "__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) h.metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    h.tensors.push_back(parse_entry(label, name, entry, h.data_bytes()));
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < h.tensors.size(); ++i)
    if (h.tensors[i].begin < h.tensors[i - 1].end)
      fail(label, "tensors '" + h.tensors[i - 1].name + "' and '" + h.tensors[i].name + "' overlap");
  return h;
}

SafetensorsHeader read_safetensors_header(const std::filesystem::path& path) {
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(path.string() + ": cannot read: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open");
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(size, 8)));
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  if (buf.size() == 8) {
    uint64_t header_len = read_le64(buf.data());
    if (header_len <= kMaxHeaderBytes && 8 + header_len <= size) {
      buf.resize(8 + header_len);
      in.read(reinterpret_cast<char*>(buf.data() + 8), static_cast<std::streamsize>(header_len));
    }
  }
  return parse_safetensors_header(buf, size, path.string());
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : file_(path), header_(parse_safetensors_header(file_.bytes(), file_.bytes().size(), path.string())) {}

std::span<const uint8_t> SafetensorsFile::data(const TensorInfo& t) const {
  return file_.bytes().subspan(header_.data_start + t.begin, t.byte_size());
}

}  // namespace keel
