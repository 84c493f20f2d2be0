// The safetensors header parser: accepts real files, rejects every malformed header with a
// message naming the file and the tensor.
#include <gtest/gtest.h>

#include <string>

#include "keel/model/safetensors.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel {
namespace {

// Parses `header_json` as the header of a file with `data_bytes` bytes of data.
SafetensorsHeader parse(const std::string& header_json, uint64_t data_bytes) {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<char>((header_json.size() >> (8 * i)) & 0xff);
  file += header_json;
  file.append(data_bytes, '\0');
  auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  return parse_safetensors_header(bytes, file.size(), "test.safetensors");
}

std::string error_of(const std::string& header_json, uint64_t data_bytes) {
  try {
    parse(header_json, data_bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ReadsRealHeader) {
  auto h = read_safetensors_header(test::shared_dir() / "models/tiny-toolcaller-mlx4/model.safetensors");
  const TensorInfo* w = h.find("model.layers.0.mlp.down_proj.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::U32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{256, 88}));
  EXPECT_EQ(h.metadata.at("format"), "mlx");
  EXPECT_EQ(h.data_start + h.data_bytes(), h.file_size);
}

TEST(Safetensors, SortsTensorsByOffset) {
  auto h = parse(R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},
                     "a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}})", 16);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[1].element_count(), 2u);
}

TEST(Safetensors, RejectsMalformedHeaders) {
  struct Case {
    const char* header;
    uint64_t data;
    const char* expect;
  };
  const Case cases[] = {
      {R"([1, 2])", 0, "not a JSON object"},
      {R"({"a": )", 0, "not valid JSON"},
      {R"({"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}})", 1, "tensor 'a': unknown dtype 'Q9'"},
      {R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4, "tensor 'a': missing dtype"},
      {R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, "negative dimension"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 0]}})", 8, "reversed"},
      {R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8, "need 3 x 4 bytes"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8, "truncated file"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12, "overlap"},
      {R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})", 8, "overflows"},
  };
  for (const auto& c : cases) {
    const std::string message = error_of(c.header, c.data);
    EXPECT_NE(message.find(c.expect), std::string::npos) << c.header << " -> " << message;
    EXPECT_EQ(message.rfind("test.safetensors: ", 0), 0u) << message;
  }
}

TEST(Safetensors, RejectsImplausibleHeaderLength) {
  std::string file = "\xff\xff\xff\xff\xff\xff\xff\x7f{}";
  auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  EXPECT_THROW(parse_safetensors_header(bytes, file.size(), "x"), Error);
}

}  // namespace
}  // namespace keel
