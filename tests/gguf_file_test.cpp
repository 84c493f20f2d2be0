// The GGUF reader (model/gguf_file.h) on real files and on every kind of damage: each damaged
// file is refused with keel::Error naming the file and the key or tensor, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "keel/model/gguf_file.h"
#include "keel/model/gguf_writer.h"
#include "keel/model/model_files.h"
#include "keel/util/error.h"
#include "test_support.h"

namespace keel {
namespace {

using gguf::ValueType;

std::filesystem::path gguf_fixture(const std::string& name) { return test::shared_dir() / "models/gguf" / name; }

// A small valid file: a few keys of every kind, one F32 and one Q8_0 tensor.
gguf::Writer small_file() {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.block_count", 1);
  w.set_float32("llama.rope.freq_base", 10000.0f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_strings("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.set_int32s("tokenizer.ggml.token_type", {1, 1, 3});
  w.set_float32s("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f});
  w.add_tensor("norm.weight", {4}, 0, std::string(16, '\1'));
  w.add_tensor("blk.0.attn_q.weight", {32, 2}, 8, std::string(2 * 34, '\2'));
  return w;
}

gguf::Header parse(const std::string& bytes) {
  return gguf::parse_header({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "damaged.gguf");
}

// The parse error's message; fails the test when the bytes parse.
std::string refusal(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the damaged file parsed";
  return "";
}

// Byte offset of the first occurrence of `needle` (a key or tensor name) in `bytes`.
size_t offset_of(const std::string& bytes, const std::string& needle) {
  const size_t at = bytes.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return at;
}

template <typename T>
void poke(std::string& bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

TEST(GgufFile, ReadsEveryValueKindAndTensorInfo) {
  const std::string bytes = small_file().bytes();
  const gguf::Header h = parse(bytes);
  EXPECT_EQ(h.version, 3u);
  EXPECT_EQ(h.find("general.architecture")->text, "llama");
  EXPECT_EQ(h.find("llama.block_count")->integer, 1);
  EXPECT_FLOAT_EQ(h.find("llama.rope.freq_base")->number, 10000.0);
  EXPECT_EQ(h.find("tokenizer.ggml.add_bos_token")->integer, 1);
  EXPECT_EQ(h.find("tokenizer.ggml.tokens")->texts, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(h.find("tokenizer.ggml.token_type")->integers, (std::vector<int64_t>{1, 1, 3}));
  EXPECT_EQ(h.find("tokenizer.ggml.scores")->numbers, (std::vector<double>{0.0, -1.0, -2.0}));
  ASSERT_EQ(h.tensors.size(), 2u);
  const gguf::Tensor& q = *h.find_tensor("blk.0.attn_q.weight");
  EXPECT_EQ(q.type->name, "Q8_0");
  EXPECT_EQ(q.shape(), (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(q.bytes, 68u);
  EXPECT_EQ(h.data_start % 32, 0u);
  EXPECT_EQ(q.offset % 32, 0u);
}

TEST(GgufFile, EveryTruncationIsRefused) {
  const std::string bytes = small_file().bytes();
  // Cutting inside the last tensor's padding leaves a valid file; anything shorter than its data must fail.
  const gguf::Header whole = parse(bytes);
  const gguf::Tensor& last = whole.tensors.back();
  for (size_t n = 0; n < whole.data_start + last.offset + last.bytes; ++n) {
    const std::string message = refusal(bytes.substr(0, n));
    EXPECT_NE(message.find("damaged.gguf: "), std::string::npos) << message;
  }
}

TEST(GgufFile, DamagedHeadersAreRefusedByName) {
  const std::string good = small_file().bytes();
  {
    std::string b = good;
    b[0] = 'X';
    EXPECT_NE(refusal(b).find("no \"GGUF\" magic"), std::string::npos);
  }
  {
    std::string b = good;
    poke<uint32_t>(b, 4, 7);
    EXPECT_NE(refusal(b).find("GGUF version 7 is not supported"), std::string::npos);
  }
  {
    std::string b = good;
    poke<uint64_t>(b, 16, uint64_t{1} << 60);  // metadata count
    EXPECT_NE(refusal(b).find("metadata entries cannot fit"), std::string::npos);
  }
  {
    std::string b = good;
    poke<uint64_t>(b, 8, uint64_t{1} << 60);  // tensor count
    EXPECT_NE(refusal(b).find("tensors cannot fit"), std::string::npos);
  }
  {  // a key's string length far past the end
    std::string b = good;
    poke<uint64_t>(b, offset_of(b, "llama.block_count") - 8, uint64_t{1} << 40);
    EXPECT_NE(refusal(b).find("runs past the end of the file"), std::string::npos);
  }
  {  // an unknown value type
    std::string b = good;
    poke<uint32_t>(b, offset_of(b, "llama.block_count") + 17, 99);
    EXPECT_NE(refusal(b).find("key 'llama.block_count': unknown value type 99"), std::string::npos);
  }
  {  // an array count the file cannot hold
    std::string b = good;
    poke<uint64_t>(b, offset_of(b, "tokenizer.ggml.tokens") + 21 + 4 + 4, uint64_t{1} << 50);
    EXPECT_NE(refusal(b).find("key 'tokenizer.ggml.tokens': an array of"), std::string::npos);
  }
  {  // arrays of arrays
    std::string b = good;
    poke<uint32_t>(b, offset_of(b, "tokenizer.ggml.token_type") + 25 + 4, static_cast<uint32_t>(ValueType::ARRAY));
    EXPECT_NE(refusal(b).find("arrays of arrays"), std::string::npos);
  }
  {  // a bool that is neither 0 nor 1
    std::string b = good;
    b[offset_of(b, "tokenizer.ggml.add_bos_token") + 28 + 4] = 5;
    EXPECT_NE(refusal(b).find("key 'tokenizer.ggml.add_bos_token': a bool holds 5"), std::string::npos);
  }
}

TEST(GgufFile, DamagedTensorInfosAreRefusedByName) {
  const std::string good = small_file().bytes();
  const size_t info = offset_of(good, "blk.0.attn_q.weight") + 19;  // after the name: n_dims
  {
    std::string b = good;
    poke<uint32_t>(b, info, 0);
    EXPECT_NE(refusal(b).find("tensor 'blk.0.attn_q.weight': 0 dimensions"), std::string::npos);
  }
  {
    std::string b = good;
    poke<uint32_t>(b, info, 9);
    EXPECT_NE(refusal(b).find("9 dimensions"), std::string::npos);
  }
  {  // innermost dimension not a whole number of Q8_0 blocks
    std::string b = good;
    poke<uint64_t>(b, info + 4, 33);
    EXPECT_NE(refusal(b).find("innermost dimension 33 is not a multiple of Q8_0's block of 32"), std::string::npos);
  }
  {  // dimensions whose product overflows
    std::string b = good;
    poke<uint64_t>(b, info + 4, uint64_t{1} << 62);
    poke<uint64_t>(b, info + 12, uint64_t{1} << 40);
    EXPECT_NE(refusal(b).find("overflow"), std::string::npos);
  }
  {  // an unknown ggml type
    std::string b = good;
    poke<uint32_t>(b, info + 20, 77);
    EXPECT_NE(refusal(b).find("tensor 'blk.0.attn_q.weight': unknown ggml type 77"), std::string::npos);
  }
  {  // a misaligned offset
    std::string b = good;
    poke<uint64_t>(b, info + 24, 40);
    EXPECT_NE(refusal(b).find("offset 40 is not aligned to 32"), std::string::npos);
  }
  {  // data past the end of the file
    std::string b = good;
    poke<uint64_t>(b, info + 24, 1 << 20);
    EXPECT_NE(refusal(b).find("tensor 'blk.0.attn_q.weight': data ends at byte"), std::string::npos);
  }
  {  // the same name twice
    gguf::Writer w = small_file();
    w.add_tensor("norm.weight", {4}, 0, std::string(16, '\0'));
    EXPECT_NE(refusal(w.bytes()).find("tensor 'norm.weight': appears twice"), std::string::npos);
  }
  {  // the same key twice
    gguf::Writer w = small_file();
    w.set_uint32("llama.block_count", 2);
    EXPECT_NE(refusal(w.bytes()).find("key 'llama.block_count': appears twice"), std::string::npos);
  }
  {  // an alignment that is not a power of two
    gguf::Writer w = small_file();
    w.set_uint32("general.alignment", 24);
    EXPECT_NE(refusal(w.bytes()).find("key 'general.alignment': must be a positive power of two"), std::string::npos);
  }
}

TEST(GgufFile, AccessorsNameTheKeyOfAWrongType) {
  test::TempDir dir;
  small_file().write(dir.path() / "m.gguf");
  gguf::File f(dir.path() / "m.gguf");
  EXPECT_EQ(f.optional_int("llama.block_count"), 1);
  EXPECT_EQ(f.optional_string("general.architecture"), "llama");
  EXPECT_EQ(f.optional_int("no.such.key"), std::nullopt);
  try {
    (void)f.optional_int("general.architecture");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.gguf: key 'general.architecture': is a string, expected an integer"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)f.string_array("tokenizer.ggml.scores"), Error);
  EXPECT_THROW((void)f.require_int("llama.context_length", "needed"), Error);
  const auto* q = f.header().find_tensor("blk.0.attn_q.weight");
  EXPECT_EQ(f.data(*q).size(), 68u);
  EXPECT_EQ(f.data(*q)[0], 2);
}

TEST(GgufFile, ReadsTheFixtureFiles) {
  for (const char* name : {"tiny-toolcaller-Q8_0.gguf", "tiny-toolcaller-Q4_0.gguf", "tiny-toolcaller-Q4_K_M.gguf",
                           "tiny-toolcaller-Q6_K.gguf", "tiny-gptoss-random-MXFP4.gguf"}) {
    gguf::File f(gguf_fixture(name));
    EXPECT_FALSE(f.header().tensors.empty()) << name;
    EXPECT_TRUE(f.optional_string("general.architecture").has_value()) << name;
  }
  gguf::File q(gguf_fixture("tiny-toolcaller-Q4_K_M.gguf"));
  EXPECT_EQ(q.optional_string("general.architecture"), "qwen2");
  EXPECT_EQ(q.optional_int("qwen2.block_count"), 4);
  EXPECT_EQ(q.string_array("tokenizer.ggml.tokens")->size(), 1661u);
  EXPECT_EQ(q.header().find_tensor("token_embd.weight")->type->name, "Q6_K");
}

TEST(GgufFile, SplitModelsListEveryShardAndNameAMissingOne) {
  test::TempDir dir;
  for (int i = 1; i <= 3; ++i) {
    gguf::Writer w = small_file();
    w.set_uint32("split.no", static_cast<uint32_t>(i - 1));
    w.set_uint32("split.count", 3);
    w.write(dir.path() / ("m-0000" + std::to_string(i) + "-of-00003.gguf"));
  }
  // Named by any shard, or by the folder: every shard, in order.
  for (const auto& named : {dir.path() / "m-00002-of-00003.gguf", dir.path()}) {
    const ModelFiles files = find_model_files(named);
    ASSERT_EQ(files.gguf.size(), 3u);
    EXPECT_EQ(files.path.filename(), "m-00001-of-00003.gguf");
    EXPECT_EQ(files.gguf.back()->path().filename(), "m-00003-of-00003.gguf");
    EXPECT_TRUE(files.config_json.empty());
  }
  std::filesystem::remove(dir.path() / "m-00003-of-00003.gguf");
  try {
    find_model_files(dir.path() / "m-00001-of-00003.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing shard 3 of 3"), std::string::npos) << e.what();
  }
  small_file().write(dir.path() / "other.gguf");
  try {
    find_model_files(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds several GGUF models"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace keel
