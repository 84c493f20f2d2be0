// The ggml block formats of GGUF files (ops::decode_row and ops::matmul on Q8_0, Q4_0, Q5_0, Q4_K,
// Q5_K, Q6_K and MXFP4_GGUF matrices). Blocks are random bytes with finite scales; the reference
// dequantizer below is written from the block layouts (one formula per element, not ggml's loops),
// so decode_row must give its floats bit for bit (f16 scales widened exactly, d * sc in f32 before
// the code, as ggml's dequantize_row_* and gguf-py do). matmul is checked against the reference
// rows in double precision, and for the invariant chunked prefill rests on: one token gives the bits
// of its row among many, and a row does not depend on which rows share its call. Real blocks come
// from the GGUF fixtures in shared/models/gguf (found by a small header walk here); a missing file
// fails the test, since every checkout runs beside the shared folder.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "keel/ops/ggml_bf16_x86.h"
#include "keel/ops/ggml_blocks.h"
#include "keel/ops/int16_dot.h"
#include "keel/ops/interleaved_rows.h"
#include "keel/ops/matmul.h"
#include "keel/ops/simd_target.h"
#include "keel/util/half.h"
#include "guarded_bytes_support.h"
#include "simd_target_support.h"
#include "test_support.h"

namespace {

using namespace keel;

uint16_t u16_at(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32_at(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24); }
float half(const uint8_t* p) { return f16_to_float(u16_at(p)); }

// 6-bit scale and min of sub-block j of a Q4_K/Q5_K block's 12 scale bytes.
void scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 0x3F;
    m = s[j + 4] & 0x3F;
  } else {
    sc = (s[j + 4] & 0x0F) | ((s[j - 4] & 0xC0) >> 2);
    m = ((s[j + 4] & 0xF0) >> 4) | ((s[j] & 0xC0) >> 2);
  }
}

// Element c of a row (its blocks at `row`), and the min subtracted from it (K formats; else 0).
struct RefValue {
  float value;
  float offset;
};
RefValue reference(WeightFormat f, const uint8_t* row, int64_t c) {
  const GgmlBlock g = ggml_block_size(f);
  const uint8_t* b = row + (c / g.elements) * g.bytes;
  const int e = static_cast<int>(c % g.elements);
  switch (f) {
    case WeightFormat::Q8_0: return {half(b) * static_cast<float>(static_cast<int8_t>(b[2 + e])), 0};
    case WeightFormat::Q4_0: {
      const int q = e < 16 ? b[2 + e] & 15 : b[2 + e - 16] >> 4;
      return {half(b) * static_cast<float>(q - 8), 0};
    }
    case WeightFormat::Q5_0: {
      const uint32_t h = u32_at(b + 2);
      const int q = (e < 16 ? b[6 + e] & 15 : b[6 + e - 16] >> 4) | static_cast<int>(((h >> e) & 1) << 4);
      return {half(b) * static_cast<float>(q - 16), 0};
    }
    case WeightFormat::Q4_K:
    case WeightFormat::Q5_K: {
      const bool five = f == WeightFormat::Q5_K;
      const uint8_t* qs = b + (five ? 48 : 16);
      const int chunk = e / 64, high = (e % 64) / 32, l = e % 32;
      int sc, m;
      scale_min(b + 4, 2 * chunk + high, sc, m);
      int q = high ? qs[32 * chunk + l] >> 4 : qs[32 * chunk + l] & 15;
      if (five) q += ((b[16 + l] >> (2 * chunk + high)) & 1) * 16;
      const float d1 = half(b) * static_cast<float>(sc), m1 = half(b + 2) * static_cast<float>(m);
      return {d1 * static_cast<float>(q) - m1, m1};
    }
    case WeightFormat::Q6_K: {
      const int n = e / 128, quad = (e % 128) / 32, l = e % 32;
      const uint8_t lq = b[64 * n + 32 * (quad % 2) + l];
      const int lo = quad < 2 ? lq & 15 : lq >> 4;
      const int hi = (b[128 + 32 * n + l] >> (2 * quad)) & 3;
      const int sc = static_cast<int8_t>(b[192 + 8 * n + 2 * quad + l / 16]);
      return {half(b + 208) * static_cast<float>(sc) * static_cast<float>((lo | (hi << 4)) - 32), 0};
    }
    case WeightFormat::MXFP4_GGUF: {
      // Code 8 is e2m1's -0; ggml (kvalues_mxfp4, an int8 table) and gguf-py make it +0, as here.
      static const double kE2m1[16] = {0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6};
      const int code = e < 16 ? b[1 + e] & 15 : b[1 + e - 16] >> 4;
      return {static_cast<float>(std::ldexp(kE2m1[code], b[0] - 127)), 0};
    }
    default: return {NAN, 0};
  }
}

const WeightFormat kFormats[] = {WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q5_0, WeightFormat::Q4_K,
                                 WeightFormat::Q5_K, WeightFormat::Q6_K, WeightFormat::MXFP4_GGUF};

// Random blocks with finite scales of the sizes real files hold (|d| about 1e-3 .. 3e-2 for the
// 32-element formats, sub-block scales up to 63 or +-127 for the K formats, exponents 2^-9..2^3).
// They end at an unmapped page, so a kernel reading past the last row faults.
test::GuardedBytes random_blocks(WeightFormat f, int64_t rows, int64_t cols, uint32_t seed) {
  const GgmlBlock g = ggml_block_size(f);
  const int64_t blocks = rows * cols / g.elements;
  test::GuardedBytes out(static_cast<size_t>(blocks * g.bytes));
  std::mt19937 rng(seed);
  for (auto& v : out) v = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> mag(1e-3f, 3e-2f), kmag(1e-4f, 2e-3f);
  auto put_half = [&](uint8_t* p, float v) {
    const uint16_t h = float_to_f16(v);
    p[0] = static_cast<uint8_t>(h), p[1] = static_cast<uint8_t>(h >> 8);
  };
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* b = out.data() + i * g.bytes;
    const float sign = rng() & 1 ? -1.0f : 1.0f;
    switch (f) {
      case WeightFormat::Q8_0:
      case WeightFormat::Q4_0:
      case WeightFormat::Q5_0: put_half(b, sign * mag(rng)); break;
      case WeightFormat::Q4_K:
      case WeightFormat::Q5_K: put_half(b, kmag(rng)), put_half(b + 2, kmag(rng)); break;
      case WeightFormat::Q6_K: put_half(b + 208, sign * kmag(rng)); break;
      case WeightFormat::MXFP4_GGUF: b[0] = static_cast<uint8_t>(118 + rng() % 13); break;
      default: break;
    }
  }
  return out;
}

Matrix view(WeightFormat f, const test::GuardedBytes& bytes, int64_t rows, int64_t cols) {
  Matrix m;
  m.name = std::string("test.") + weight_format_name(f);
  m.format = f;
  m.rows = rows;
  m.cols = cols;
  m.data = bytes.data();
  return m;
}

void expect_rows_exact(const Matrix& m, int64_t rows_to_check) {
  std::vector<float> got(static_cast<size_t>(m.cols));
  for (int64_t r = 0; r < rows_to_check; ++r) {
    ops::decode_row(m, r, got.data());
    const uint8_t* row = m.data + r * static_cast<int64_t>(m.row_bytes());
    for (int64_t c = 0; c < m.cols; ++c) {
      const float want = reference(m.format, row, c).value;
      ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(c)]), std::bit_cast<uint32_t>(want))
          << m.name << " row " << r << " col " << c << ": " << got[static_cast<size_t>(c)] << " vs " << want;
    }
  }
}

// The activations each matmul path multiplies: rounded to bf16 (the AVX512_BF16 kernels), quantized
// to int16 per block of 32 (int16_dot.h, every other target), or exact (the portable path).
enum class Activations { bf16, i16, exact };
Activations activations_of(WeightFormat f) {
  if (ops::ggml_bf16_supported(f)) return Activations::bf16;
  return ops::ggml_i16_supported(f) ? Activations::i16 : Activations::exact;
}

// matmul against the reference rows in double precision, with x as the path that ran takes it
// (which checks that path did run) and exact. Against that x only f32 accumulation error remains:
// at most ~(V dot-product steps + the chain of superblocks + 4 reduction levels) roundings of 2^-24
// relative to the sum of |terms|, where the K formats' terms are d*sc*q*x and dmin*m*x separately
// (the kernels subtract dmin*m*sum(x) per sub-block): under 60 * 6e-8 for these widths, so 2e-5
// leaves a wide margin while a misplaced code or scale is far outside. (The int16 path's products
// and their sums within a unit are exact integers.) Against exact x the bound is the rounding of
// x: 2^-9 of each term for bf16, 2^-16 of the block's largest for int16.
void expect_matches_reference(const Matrix& m, const float* x, int64_t tokens, const float* y) {
  const Activations path = activations_of(m.format);
  ops::I16Activations quantized;
  ops::size_i16_activations(m.cols, tokens, false, quantized, ops::i16_activation_limit(m.format));
  ops::quantize_i16_activations(x, 0, tokens, quantized);
  for (int64_t r = 0; r < m.rows; ++r) {
    const uint8_t* row = m.data + r * static_cast<int64_t>(m.row_bytes());
    for (int64_t t = 0; t < tokens; ++t) {
      double exact = 0, taken = 0, magnitude = 0;
      for (int64_t c = 0; c < m.cols; ++c) {
        const RefValue w = reference(m.format, row, c);
        const float xv = x[t * m.cols + c];
        const size_t at = static_cast<size_t>(t * m.cols + c);
        const double x_taken = path == Activations::bf16 ? bf16_to_float(float_to_bf16(xv))
                               : path == Activations::i16
                                   ? static_cast<double>(quantized.scale[at / 32]) * quantized.q[at]
                                   : static_cast<double>(xv);
        exact += static_cast<double>(w.value) * xv;
        taken += static_cast<double>(w.value) * x_taken;
        magnitude += (std::abs(static_cast<double>(w.value) + w.offset) + std::abs(w.offset)) * std::abs(xv);
      }
      const double got = y[t * m.rows + r];
      EXPECT_LE(std::abs(got - taken), 2e-5 * magnitude + 1e-6)
          << m.name << " row " << r << " token " << t << ": " << got << " vs " << taken << " (x as the path takes it), "
          << exact << " (exact x)";
      EXPECT_LE(std::abs(got - exact), 4e-3 * magnitude + 1e-6) << m.name << " row " << r << " token " << t;
    }
  }
}

// One token alone gives the bits of its row among kInvarianceTokens (token tiles of 16, 8 and 4,
// then 4-token and 1-token remainders, in the int16 paths); so do calls of 2 and of 19 starting at
// token 13 (other tiles over the same tokens).
constexpr int64_t kInvarianceTokens = 37;
void expect_token_invariance(const Matrix& m, const float* x, ThreadPool& pool) {
  const int64_t tokens = kInvarianceTokens;
  std::vector<float> many(static_cast<size_t>(tokens * m.rows)), one(static_cast<size_t>(m.rows));
  ops::matmul(m, x, tokens, many.data(), pool);
  for (int64_t t = 0; t < tokens; ++t) {
    ops::matmul(m, x + t * m.cols, 1, one.data(), pool);
    for (int64_t r = 0; r < m.rows; ++r)
      ASSERT_EQ(std::bit_cast<uint32_t>(one[static_cast<size_t>(r)]),
                std::bit_cast<uint32_t>(many[static_cast<size_t>(t * m.rows + r)]))
          << m.name << " token " << t << " row " << r;
  }
  for (const int64_t part : {int64_t{2}, int64_t{19}}) {
    std::vector<float> some(static_cast<size_t>(part * m.rows));
    ops::matmul(m, x + 13 * m.cols, part, some.data(), pool);
    for (int64_t i = 0; i < part * m.rows; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(some[static_cast<size_t>(i)]),
                std::bit_cast<uint32_t>(many[static_cast<size_t>(13 * m.rows + i)]))
          << m.name << " " << part << " tokens from 13: " << i;
  }
}

// Each row viewed as a one-row matrix (a task of its own, another tile shape) gives the bits it
// gets among all rows, for one token, six and 21 (token tiles).
void expect_rows_independent(const Matrix& m, const float* x, ThreadPool& pool, std::initializer_list<int64_t> rows) {
  for (const int64_t tokens : {int64_t{1}, int64_t{6}, int64_t{21}}) {
    std::vector<float> all(static_cast<size_t>(tokens * m.rows)), alone(static_cast<size_t>(tokens));
    ops::matmul(m, x, tokens, all.data(), pool);
    for (const int64_t r : rows) {
      Matrix one;
      one.name = m.name + ".row";
      one.format = m.format;
      one.rows = 1;
      one.cols = m.cols;
      one.data = m.data + r * static_cast<int64_t>(m.row_bytes());
      ops::matmul(one, x, tokens, alone.data(), pool);
      for (int64_t t = 0; t < tokens; ++t)
        ASSERT_EQ(std::bit_cast<uint32_t>(alone[static_cast<size_t>(t)]),
                  std::bit_cast<uint32_t>(all[static_cast<size_t>(t * m.rows + r)]))
            << m.name << " row " << r << " token " << t << " of " << tokens;
    }
  }
}

struct Shape {
  WeightFormat format;
  int64_t rows, cols;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  std::string n = weight_format_name(info.param.format);
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  return n + "_" + std::to_string(info.param.rows) + "x" + std::to_string(info.param.cols);
}

class OpsGgmlMatmul : public ::testing::TestWithParam<Shape> {};

TEST_P(OpsGgmlMatmul, DecodeRowIsTheReferenceBitForBit) {
  const Shape s = GetParam();
  const auto bytes = random_blocks(s.format, s.rows, s.cols, 3u + static_cast<uint32_t>(s.cols));
  expect_rows_exact(view(s.format, bytes, s.rows, s.cols), s.rows);
}

TEST_P(OpsGgmlMatmul, MatchesTheDequantizedRows) {
  const Shape s = GetParam();
  const auto bytes = random_blocks(s.format, s.rows, s.cols, 11u + static_cast<uint32_t>(s.cols));
  const Matrix m = view(s.format, bytes, s.rows, s.cols);
  ThreadPool pool(2);
  test::for_each_simd_target([&] {
    for (const int64_t tokens : {int64_t{1}, int64_t{5}, int64_t{21}}) {
      const std::vector<float> x = test::normal_floats(tokens * s.cols, 7);
      std::vector<float> y(static_cast<size_t>(tokens * s.rows));
      ops::matmul(m, x.data(), tokens, y.data(), pool);
      expect_matches_reference(m, x.data(), tokens, y.data());
    }
  });
}

TEST_P(OpsGgmlMatmul, OneTokenEqualsItsRowAmongMany) {
  const Shape s = GetParam();
  const auto bytes = random_blocks(s.format, s.rows, s.cols, 5u + static_cast<uint32_t>(s.rows));
  const std::vector<float> x = test::normal_floats(kInvarianceTokens * s.cols, 3);
  ThreadPool pool(2);
  test::for_each_simd_target([&] { expect_token_invariance(view(s.format, bytes, s.rows, s.cols), x.data(), pool); });
}

TEST_P(OpsGgmlMatmul, RowsDoNotDependOnTheirNeighbours) {
  const Shape s = GetParam();
  const auto bytes = random_blocks(s.format, s.rows, s.cols, 9);
  const std::vector<float> x = test::normal_floats(21 * s.cols, 4);
  ThreadPool pool(1);
  test::for_each_simd_target([&] {
    expect_rows_independent(view(s.format, bytes, s.rows, s.cols), x.data(), pool, {0, s.rows / 2, s.rows - 1});
  });
}

// The int16 products (what matmul runs without AVX512_BF16), called directly, give the same bits
// on every SIMD target: the unit sums are exact integers and the float operations after them come
// in one order whatever the lane count (int16_dot.h). One token, two (the row path's pairs), and
// 11 (token tiles of 4 and a remainder).
TEST_P(OpsGgmlMatmul, Int16ProductsAreTheSameBitsOnEveryTarget) {
  const Shape s = GetParam();
  const auto bytes = random_blocks(s.format, s.rows, s.cols, 17u + static_cast<uint32_t>(s.cols));
  const ops::GgmlRows g = ops::ggml_rows(view(s.format, bytes, s.rows, s.cols));
  for (const int64_t tokens : {int64_t{1}, int64_t{2}, int64_t{11}}) {
    const std::vector<float> x = test::normal_floats(tokens * s.cols, 19);
    ops::I16Activations a;
    ops::size_i16_activations(s.cols, tokens, false, a, ops::i16_activation_limit(s.format));
    ops::quantize_i16_activations(x.data(), 0, tokens, a);
    std::vector<std::vector<float>> per_target;
    test::for_each_simd_target([&] {
      std::vector<float> y(static_cast<size_t>(tokens * s.rows));
      ops::gemm_ggml_i16(g, a, tokens, 0, s.rows, y.data(), s.rows);
      per_target.push_back(std::move(y));
    });
    for (size_t k = 1; k < per_target.size(); ++k)
      for (size_t i = 0; i < per_target[0].size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(per_target[k][i]), std::bit_cast<uint32_t>(per_target[0][i]))
            << weight_format_name(s.format) << " " << tokens << " tokens, target " << k << ", output " << i;
  }
}

// The portable path (what matmul runs without AVX512_BF16), called directly: f32 products of the
// exact rows, so against exact x to accumulation error; one token gives its row's bits among seven,
// and rows cut into tasks of 16 give the bits of one call over all of them.
TEST_P(OpsGgmlMatmul, PortablePathIsExactAndInvariant) {
  const Shape s = GetParam();
  const auto bytes = random_blocks(s.format, s.rows, s.cols, 13u + static_cast<uint32_t>(s.cols));
  const Matrix m = view(s.format, bytes, s.rows, s.cols);
  const ops::GgmlRows g = ops::ggml_rows(m);
  const int64_t tokens = 7;
  const std::vector<float> x = test::normal_floats(tokens * s.cols, 8);
  std::vector<float> all(static_cast<size_t>(tokens * s.rows)), tasks(all.size()), one(static_cast<size_t>(s.rows));
  ops::gemm_ggml_f32(g, x.data(), tokens, 0, s.rows, all.data(), s.rows);
  for (int64_t r0 = 0; r0 < s.rows; r0 += 16)
    ops::gemm_ggml_f32(g, x.data(), tokens, r0, std::min(s.rows, r0 + 16), tasks.data() + r0, s.rows);
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(all[i]), std::bit_cast<uint32_t>(tasks[i])) << m.name << " " << i;
  for (int64_t t = 0; t < tokens; ++t) {
    ops::gemm_ggml_f32(g, x.data() + t * s.cols, 1, 0, s.rows, one.data(), 0);
    for (int64_t r = 0; r < s.rows; ++r)
      ASSERT_EQ(std::bit_cast<uint32_t>(one[static_cast<size_t>(r)]),
                std::bit_cast<uint32_t>(all[static_cast<size_t>(t * s.rows + r)]))
          << m.name << " token " << t << " row " << r;
  }
  for (int64_t r = 0; r < s.rows; ++r) {
    const uint8_t* row = m.data + r * static_cast<int64_t>(m.row_bytes());
    for (int64_t t = 0; t < tokens; ++t) {
      double exact = 0, magnitude = 0;
      for (int64_t c = 0; c < s.cols; ++c) {
        const double w = reference(s.format, row, c).value, xv = x[static_cast<size_t>(t * s.cols + c)];
        exact += w * xv;
        magnitude += std::abs(w * xv);
      }
      EXPECT_LE(std::abs(all[static_cast<size_t>(t * s.rows + r)] - exact), 2e-5 * magnitude + 1e-6)
          << m.name << " row " << r << " token " << t;
    }
  }
}

// Widths: the 32-element formats run 4 blocks per superblock (Q8_0, Q4_0, Q5_0, MXFP4), so 96 and
// 224 end mid-superblock and 704 (the tiny-toolcaller FFN, 22 blocks) too; 512 fills them. The K
// formats take whole 256-element blocks: 256, 768, 1280. Rows: 37 (tasks of 16 and a short one,
// tiles of 4 and a remainder), 3 (under one tile), 5.
std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (WeightFormat f : kFormats) {
    if (ggml_block_size(f).elements == 32) {
      for (const Shape& s : {Shape{f, 37, 96}, Shape{f, 3, 224}, Shape{f, 37, 704}, Shape{f, 5, 512}}) out.push_back(s);
    } else {
      for (const Shape& s : {Shape{f, 37, 256}, Shape{f, 3, 768}, Shape{f, 37, 1280}}) out.push_back(s);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Formats, OpsGgmlMatmul, ::testing::ValuesIn(shapes()), shape_name);

// ---- Rows interleaved by 8 (ops/interleaved_rows.h), the layout keel makes at load for the
// int16 kernels: the same values and the same product bits as the rows as stored.

// The interleaved copy of `rows` (a multiple of 8) rows, ending at an unmapped page.
test::GuardedBytes interleaved(WeightFormat f, const test::GuardedBytes& stored, int64_t rows, int64_t cols) {
  test::GuardedBytes out(stored.size());
  const int64_t group_bytes = ops::kInterleavedRows * static_cast<int64_t>(stored.size()) / rows;
  for (int64_t g = 0; g < rows / ops::kInterleavedRows; ++g)
    ops::interleave_ggml_group(f, stored.data() + g * group_bytes, cols, out.data() + g * group_bytes);
  return out;
}

const WeightFormat kInterleavable[] = {WeightFormat::Q4_0, WeightFormat::MXFP4_GGUF, WeightFormat::Q8_0, WeightFormat::Q4_K,
                                      WeightFormat::Q5_K, WeightFormat::Q5_0,         WeightFormat::Q6_K};

// c columns, or the next whole number of the format's blocks (256 elements for the K formats).
int64_t whole_blocks(WeightFormat f, int64_t c) {
  const int64_t e = ggml_block_size(f).elements;
  return (c + e - 1) / e * e;
}

TEST(OpsGgmlInterleaved, RowsComeBackAsStored) {
  for (const WeightFormat f : kInterleavable) {
    SCOPED_TRACE(weight_format_name(f));
    const int64_t rows = 40, cols = whole_blocks(f, 704);
    ASSERT_TRUE(ops::ggml_interleavable(f));
    const auto stored = random_blocks(f, rows, cols, 5);
    const auto groups = interleaved(f, stored, rows, cols);
    ASSERT_NE(std::memcmp(stored.data(), groups.data(), stored.size()), 0);
    Matrix plain = view(f, stored, rows, cols), m = view(f, groups, rows, cols);
    m.interleaved = true;
    const size_t row_bytes = m.row_bytes();
    std::vector<uint8_t> row(row_bytes);
    std::vector<float> want(static_cast<size_t>(cols)), got(want.size());
    for (int64_t r = 0; r < rows; ++r) {
      ops::deinterleave_ggml_row(f, groups.data(), cols, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), stored.data() + r * static_cast<int64_t>(row_bytes), row_bytes), 0) << "row " << r;
      ops::decode_row(plain, r, want.data());
      ops::decode_row(m, r, got.data());
      ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << "row " << r;
    }
  }
}

// On every target (the x86 ones with row groups read the groups in place, the others block by
// block), any number of tokens (tiles of 4 and each remainder), any row range of whole groups:
// the bits of the stored rows.
TEST(OpsGgmlInterleaved, Int16ProductsAreTheBitsOfTheStoredRows) {
  for (const WeightFormat f : kInterleavable)
    for (const auto [rows, c] : {std::pair<int64_t, int64_t>{40, 96}, {16, 704}, {24, 512}}) {
      const int64_t cols = whole_blocks(f, c);
      const auto stored = random_blocks(f, rows, cols, 23u + static_cast<uint32_t>(cols));
      const auto groups = interleaved(f, stored, rows, cols);
      const ops::GgmlRows plain = ops::ggml_rows(view(f, stored, rows, cols));
      ops::GgmlRows g = ops::ggml_rows(view(f, groups, rows, cols));
      g.interleaved = true;
      for (const int64_t tokens : {1, 2, 3, 4, 5, 8, 11}) {
        const std::vector<float> x = test::normal_floats(tokens * cols, 29);
        ops::I16Activations a;
        ops::size_i16_activations(cols, tokens, false, a, ops::i16_activation_limit(f));
        ops::quantize_i16_activations(x.data(), 0, tokens, a);
        test::for_each_simd_target([&] {
          const size_t n = static_cast<size_t>(tokens * rows);
          std::vector<float> want(n), whole(n), tasks(n), from8(n);
          ops::gemm_ggml_i16(plain, a, tokens, 0, rows, want.data(), rows);
          ops::gemm_ggml_i16(g, a, tokens, 0, rows, whole.data(), rows);
          for (int64_t r0 = 0; r0 < rows; r0 += 16)
            ops::gemm_ggml_i16(g, a, tokens, r0, std::min(rows, r0 + 16), tasks.data() + r0, rows);
          ops::gemm_ggml_i16(g, a, tokens, 8, rows, from8.data() + 8, rows);
          const std::string what = std::string(weight_format_name(f)) + " " + std::to_string(rows) + "x" +
                                   std::to_string(cols) + ", " + std::to_string(tokens) + " tokens: ";
          for (size_t i = 0; i < n; ++i) {
            if (static_cast<int64_t>(i) % rows < 8) from8[i] = want[i];  // rows 0-7 are not in that call
            ASSERT_EQ(std::bit_cast<uint32_t>(whole[i]), std::bit_cast<uint32_t>(want[i])) << what << i;
            ASSERT_EQ(std::bit_cast<uint32_t>(tasks[i]), std::bit_cast<uint32_t>(want[i])) << what << i;
            ASSERT_EQ(std::bit_cast<uint32_t>(from8[i]), std::bit_cast<uint32_t>(want[i])) << what << i;
          }
        });
      }
    }
}

// interleave_for_kernels repacks where this target's int16 kernels read groups (never where the
// AVX512_BF16 kernels run, nor rows that are not whole groups), and matmul's results are the
// stored rows' bits for decode and prefill.
TEST(OpsGgmlInterleaved, MatmulInterleavesWhereTheKernelsReadGroups) {
  ThreadPool pool(2);
  for (const WeightFormat f : kInterleavable) {
    SCOPED_TRACE(weight_format_name(f));
    const int64_t rows = 48, cols = whole_blocks(f, 704);
    const auto stored = random_blocks(f, rows, cols, 31);
    const Matrix plain = view(f, stored, rows, cols);
    test::for_each_simd_target([&] {
      Matrix m = view(f, stored, rows, cols);
      m.realigned.assign(stored.data(), stored.data() + stored.size());
      m.data = m.realigned.data();
      const bool groups = ops::i16_reads_interleaved_rows(f) && !ops::ggml_bf16_supported(f);
      EXPECT_EQ(ops::interleave_for_kernels(m), groups);
      EXPECT_EQ(m.interleaved, groups);
      for (const int64_t tokens : {1, 37}) {
        const std::vector<float> x = test::normal_floats(tokens * cols, 37);
        std::vector<float> want(static_cast<size_t>(tokens * rows)), got(want.size());
        ops::matmul(plain, x.data(), tokens, want.data(), pool);
        ops::matmul(m, x.data(), tokens, got.data(), pool);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << tokens << " tokens";
      }
      Matrix odd = view(f, stored, rows - 3, cols);
      EXPECT_FALSE(ops::interleave_for_kernels(odd));
    });
  }
}

// Scale extremes: f16 subnormal and large scales, MXFP4 exponents 0, 1 (subnormal 2^-128, 2^-127)
// and 254, 255; decode_row stays the reference's floats.
TEST(OpsGgmlBlocks, DecodeRowAtScaleExtremes) {
  for (WeightFormat f : kFormats) {
    auto bytes = random_blocks(f, 4, 256, 21);
    const GgmlBlock g = ggml_block_size(f);
    const uint16_t halves[] = {0x0001, 0x03FF, 0x7BFF, 0x8001, 0x0000, 0xFBFF, 0x3C00, 0x0400};
    const uint8_t exps[] = {0, 1, 2, 254, 255, 127, 128, 0};
    for (size_t i = 0; i * g.bytes < bytes.size(); ++i) {
      uint8_t* b = bytes.data() + i * g.bytes;
      const uint16_t h = halves[i % 8];
      switch (f) {
        case WeightFormat::MXFP4_GGUF: b[0] = exps[i % 8]; break;
        case WeightFormat::Q6_K: b[208] = static_cast<uint8_t>(h), b[209] = static_cast<uint8_t>(h >> 8); break;
        case WeightFormat::Q4_K:
        case WeightFormat::Q5_K: b[2] = static_cast<uint8_t>(h), b[3] = static_cast<uint8_t>(h >> 8); [[fallthrough]];
        default: b[0] = static_cast<uint8_t>(h), b[1] = static_cast<uint8_t>(h >> 8); break;
      }
    }
    expect_rows_exact(view(f, bytes, 4, 256), 4);
  }
}

// ---- Real blocks: a minimal walk of a GGUF header (version 3: counts, key/values skipped except
// general.alignment, tensor infos) to find each tensor's type and bytes.

struct FileTensor {
  std::string name;
  uint32_t type;
  std::vector<int64_t> dims;  // innermost first
  uint64_t offset;
};

struct GgufBlob {
  std::vector<uint8_t> bytes;
  std::vector<FileTensor> tensors;
  uint64_t data_start = 0;
};

bool read_gguf(const std::filesystem::path& path, GgufBlob& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.bytes.assign(std::istreambuf_iterator<char>(in), {});
  size_t pos = 0;
  auto need = [&](size_t n) {
    if (pos + n > out.bytes.size()) throw std::runtime_error("truncated gguf");
  };
  auto u32 = [&] { need(4); uint32_t v; std::memcpy(&v, out.bytes.data() + pos, 4); pos += 4; return v; };
  auto u64 = [&] { need(8); uint64_t v; std::memcpy(&v, out.bytes.data() + pos, 8); pos += 8; return v; };
  auto str = [&] { const uint64_t n = u64(); need(n); std::string s(reinterpret_cast<const char*>(out.bytes.data() + pos), n); pos += n; return s; };
  const size_t scalar_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  std::function<void(uint32_t)> skip = [&](uint32_t type) {
    if (type == 8) {
      str();
    } else if (type == 9) {
      const uint32_t et = u32();
      const uint64_t n = u64();
      for (uint64_t i = 0; i < n; ++i) skip(et);
    } else {
      need(scalar_size[type]);
      pos += scalar_size[type];
    }
  };
  if (u32() != 0x46554747u) return false;  // "GGUF"
  u32();  // version
  const uint64_t n_tensors = u64(), n_kv = u64();
  uint64_t alignment = 32;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = str();
    const uint32_t type = u32();
    if (key == "general.alignment" && type == 4) alignment = u32();
    else skip(type);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    FileTensor t;
    t.name = str();
    const uint32_t nd = u32();
    for (uint32_t d = 0; d < nd; ++d) t.dims.push_back(static_cast<int64_t>(u64()));
    t.type = u32();
    t.offset = u64();
    out.tensors.push_back(t);
  }
  out.data_start = (pos + alignment - 1) / alignment * alignment;
  return true;
}

// ggml type ids -> keel formats.
const std::map<uint32_t, WeightFormat> kGgmlTypes = {
    {8, WeightFormat::Q8_0}, {2, WeightFormat::Q4_0}, {6, WeightFormat::Q5_0}, {12, WeightFormat::Q4_K},
    {13, WeightFormat::Q5_K}, {14, WeightFormat::Q6_K}, {39, WeightFormat::MXFP4_GGUF}};

TEST(OpsGgmlBlocks, RealFileBlocks) {
  const std::filesystem::path dir = test::shared_dir() / "models/gguf";
  const char* files[] = {"tiny-toolcaller-Q4_K_M.gguf", "tiny-toolcaller-Q8_0.gguf", "tiny-toolcaller-Q4_0.gguf",
                         "tiny-toolcaller-Q6_K.gguf", "tiny-gptoss-random-MXFP4.gguf"};
  std::map<WeightFormat, int> seen;
  ThreadPool pool(2);
  for (const char* name : files) {
    GgufBlob g;
    ASSERT_TRUE(read_gguf(dir / name, g)) << "cannot read " << dir / name;
    std::map<uint32_t, bool> done;
    for (const FileTensor& t : g.tensors) {
      const auto it = kGgmlTypes.find(t.type);
      if (it == kGgmlTypes.end() || done[t.type] || t.dims.size() < 2) continue;
      done[t.type] = true;
      // The first matrix of this type: up to 40 rows (a 3-D expert tensor is rows of its first expert).
      const int64_t cols = t.dims[0], rows = std::min<int64_t>(t.dims[1], 40);
      Matrix m;
      m.name = std::string(name) + ":" + t.name;
      m.format = it->second;
      m.rows = rows;
      m.cols = cols;
      m.data = g.bytes.data() + g.data_start + t.offset;
      ASSERT_LE(g.data_start + t.offset + rows * m.row_bytes(), g.bytes.size()) << m.name;
      expect_rows_exact(m, rows);
      const std::vector<float> x = test::normal_floats(kInvarianceTokens * cols, 17);
      std::vector<float> y(static_cast<size_t>(7 * rows));
      test::for_each_simd_target([&] {
        ops::matmul(m, x.data(), 7, y.data(), pool);
        expect_matches_reference(m, x.data(), 7, y.data());
        expect_token_invariance(m, x.data(), pool);
      });
      ++seen[m.format];
    }
  }
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q5_0, WeightFormat::Q4_K,
                         WeightFormat::Q6_K, WeightFormat::MXFP4_GGUF})
    EXPECT_GT(seen[f], 0) << "no real " << weight_format_name(f) << " tensor found";
}

}  // namespace

namespace {

using namespace keel;

// The int16 activations (int16_dot.h): within amax / 65534 of x per element (plus the float
// rounding of scale * q), the block's largest value hits +-32767, sums are scale * sum(q), zeros
// stay zero, and a NaN or infinity makes the block's scale NaN (as the f32 products would carry it).
TEST(OpsGgmlI16, ActivationsQuantizePerBlockOf32) {
  const int64_t cols = 96, tokens = 3;
  std::vector<float> x = test::normal_floats(tokens * cols, 21);
  for (int j = 32; j < 64; ++j) x[static_cast<size_t>(j)] = 0.0f;  // token 0, block 1: zeros
  x[static_cast<size_t>(cols + 70)] = 1e6f;                          // token 1, block 2: one outlier
  x[static_cast<size_t>(2 * cols + 5)] = NAN;                        // token 2, block 0: a NaN
  ops::I16Activations a;
  ops::size_i16_activations(cols, tokens, false, a);
  ops::quantize_i16_activations(x.data(), 0, tokens, a);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t b = 0; b < cols / 32; ++b) {
      const size_t at = static_cast<size_t>(t * (cols / 32) + b);
      const float* xb = x.data() + t * cols + 32 * b;
      const int16_t* q = a.q.data() + t * cols + 32 * b;
      if (t == 2 && b == 0) {
        EXPECT_TRUE(std::isnan(a.scale[at]));
        continue;
      }
      float amax = 0;
      int64_t sum = 0, qmax = 0;
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::abs(xb[j]));
        sum += q[j];
        qmax = std::max<int64_t>(qmax, std::abs(q[j]));
      }
      if (amax == 0) {
        EXPECT_EQ(a.scale[at], 0.0f);
        EXPECT_EQ(qmax, 0);
        continue;
      }
      EXPECT_EQ(qmax, 32767) << t << " " << b;
      for (int j = 0; j < 32; ++j)
        EXPECT_LE(std::abs(static_cast<double>(a.scale[at]) * q[j] - xb[j]), amax / 65534.0 * 1.001) << t << " " << b;
      EXPECT_FLOAT_EQ(a.sum[at], a.scale[at] * static_cast<float>(sum));
      EXPECT_EQ(a.qsum[at], sum);
    }
}

// Every target quantizes to the same q, scales and sums, each q rounded to nearest with ties to
// even, as the scalar reference below: blocks whose values land exactly on halves (and just below
// them, where adding 0.5 first would round up) after the scaling, and random blocks, both orders.
TEST(OpsGgmlI16, ActivationsAreTheSameOnEveryTarget) {
  const int64_t cols = 128, tokens = 3;
  std::vector<float> x = test::normal_floats(tokens * cols, 23);
  // Block 0: amax 32767 makes the scale 1, so q = round(x): ties 0.5, 1.5, 2.5, ... and values a
  // float step below 0.5.
  x[0] = 32767.0f;
  for (int j = 1; j < 32; ++j)
    x[static_cast<size_t>(j)] = j % 3 == 0 ? std::nextafter(0.5f, 0.0f) : static_cast<float>(j / 2) + 0.5f * (j % 2 == 0 ? -1 : 1);
  for (const bool pairs_split : {false, true}) {
    std::vector<ops::I16Activations> per_target;
    test::for_each_simd_target([&] {
      ops::I16Activations a;
      ops::size_i16_activations(cols, tokens, pairs_split, a);
      ops::quantize_i16_activations(x.data(), 0, tokens, a);
      per_target.push_back(std::move(a));
    });
    for (size_t k = 1; k < per_target.size(); ++k) {
      EXPECT_EQ(per_target[k].q, per_target[0].q) << "target " << k;
      EXPECT_EQ(per_target[k].scale, per_target[0].scale) << "target " << k;
      EXPECT_EQ(per_target[k].sum, per_target[0].sum) << "target " << k;
      EXPECT_EQ(per_target[k].qsum, per_target[0].qsum) << "target " << k;
    }
    const ops::I16Activations& a = per_target[0];
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t b = 0; b < cols / 32; ++b) {
        const float* xb = x.data() + t * cols + 32 * b;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(xb[j]));
        const float inv = 32767.0f / amax;
        for (int j = 0; j < 32; ++j) {
          const float want = std::nearbyint(std::clamp(xb[j] * inv, -32767.0f, 32767.0f));
          const int at = pairs_split ? j / 2 + 16 * (j % 2) : j;
          ASSERT_EQ(a.q[static_cast<size_t>(t * cols + 32 * b + at)], static_cast<int16_t>(want))
              << "token " << t << " block " << b << " element " << j << " (x " << xb[j] << ")";
        }
      }
  }
}

}  // namespace
