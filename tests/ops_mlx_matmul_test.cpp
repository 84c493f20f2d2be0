// MLX 4- and 8-bit products (ops::matmul on MLX4/MLX8 matrices): each output is the dot product of
// the dequantized row (scale * q + bias per group) with the activations, for every group size
// MLX writes and for widths that do not fill the kernels' blocks; one token gives exactly the
// bits of its row in a call of many, and a call's row range does not matter (the thread pool
// splits rows into tasks of 16, so 37 rows end in a short task).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "keel/ops/int16_dot.h"
#include "keel/ops/matmul.h"
#include "keel/ops/mlx_bf16_x86.h"
#include "keel/util/half.h"
#include "guarded_bytes_support.h"
#include "simd_target_support.h"
#include "test_support.h"

namespace {

using namespace keel;

struct MlxMatrix {
  test::GuardedBytes words{0};  // the codes, ending at an unmapped page
  Matrix m;
};

// A random (rows, cols) MLX matrix: codes uniform, scales and biases as MLX's affine quantizer
// makes them (bias = the group's minimum, scale = its range / levels), rounded to bf16 as MLX stores them.
MlxMatrix random_mlx(int bits, int group, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  MlxMatrix out;
  const size_t n_words = static_cast<size_t>(rows * cols * bits / 32);
  out.words = test::GuardedBytes(n_words * 4);
  for (size_t i = 0; i < n_words; ++i) {
    const auto w = static_cast<uint32_t>(rng());
    std::memcpy(out.words.data() + 4 * i, &w, 4);
  }
  Matrix& m = out.m;
  m.format = bits == 4 ? WeightFormat::MLX4 : WeightFormat::MLX8;
  m.rows = rows;
  m.cols = cols;
  m.group_size = group;
  m.data = out.words.data();
  std::uniform_real_distribution<float> lo(-0.2f, 0.0f), range(0.01f, 0.4f);
  const int levels = (1 << bits) - 1;
  for (int64_t g = 0; g < rows * cols / group; ++g) {
    m.scales.push_back(bf16_to_float(float_to_bf16(range(rng) / static_cast<float>(levels))));
    m.biases.push_back(bf16_to_float(float_to_bf16(lo(rng))));
  }
  m.scales.resize(m.scales.size() + kMlxScalePadding, 0.0f);
  m.biases.resize(m.biases.size() + kMlxScalePadding, 0.0f);
  return out;
}

struct Shape {
  int bits, group;
  int64_t rows, cols;
};

class OpsMlxMatmul : public ::testing::TestWithParam<Shape> {};

ops::MlxRows rows_of(const Matrix& m) {
  return {reinterpret_cast<const uint32_t*>(m.data), m.scales.data(), m.biases.data(), m.bits(), m.group_size, m.cols};
}

// Against the dequantized rows in double precision, with x as the path that ran takes it (which
// checks that path did run): rounded to bf16 (AVX512_BF16), quantized to int16 per block of 32
// (int16_dot.h, other targets), or exact. Against that x it must agree to float accumulation error
// (any misplaced code or scale is far outside); against exact x to the rounding of x (2^-9 of each
// |w x| term for bf16).
TEST_P(OpsMlxMatmul, MatchesTheDequantizedRows) {
  const Shape s = GetParam();
  const MlxMatrix w = random_mlx(s.bits, s.group, s.rows, s.cols, 11u + static_cast<uint32_t>(s.cols));
  const int64_t tokens = 21;  // token tiles of 4, and a 1-token remainder, in the int16 path
  const std::vector<float> x = test::normal_floats(tokens * s.cols, 7);
  ThreadPool pool(2);
  std::vector<float> y(static_cast<size_t>(tokens * s.rows));
  test::for_each_simd_target([&] {
    ops::matmul(w.m, x.data(), tokens, y.data(), pool);
    const bool bf16 = ops::mlx_bf16_supported(rows_of(w.m));
    const bool i16 = !bf16 && ops::mlx_i16_supported(rows_of(w.m));
    ops::I16Activations q;
    ops::size_i16_activations(s.cols, tokens, false, q);  // element order, for the reference
    ops::quantize_i16_activations(x.data(), 0, tokens, q);
    std::vector<float> row(static_cast<size_t>(s.cols));
    for (int64_t r = 0; r < s.rows; ++r) {
      ops::decode_row(w.m, r, row.data());
      for (int64_t t = 0; t < tokens; ++t) {
        double exact = 0, taken = 0, magnitude = 0;
        for (int64_t c = 0; c < s.cols; ++c) {
          const double wv = row[static_cast<size_t>(c)];
          const auto at = static_cast<size_t>(t * s.cols + c);
          const float xv = x[at];
          exact += wv * xv;
          taken += wv * (bf16  ? static_cast<double>(bf16_to_float(float_to_bf16(xv)))
                         : i16 ? static_cast<double>(q.scale[at / 32]) * q.q[at]
                               : static_cast<double>(xv));
          magnitude += std::abs(wv * xv);
        }
        const double got = y[static_cast<size_t>(t * s.rows + r)];
        EXPECT_LE(std::abs(got - taken), 2e-5 * magnitude + 1e-6)
            << "row " << r << " token " << t << ": " << got << " vs " << taken << " (x as the path takes it) or " << exact;
        EXPECT_LE(std::abs(got - exact), 4e-3 * magnitude + 1e-6) << "row " << r << " token " << t;
      }
    }
  });
}

// The int16 products, called directly, give the same bits on every SIMD target (int16_dot.h): one
// token, two (the row path's pairs), and 11 (token tiles of 4 and a remainder).
TEST_P(OpsMlxMatmul, Int16ProductsAreTheSameBitsOnEveryTarget) {
  const Shape s = GetParam();
  const MlxMatrix w = random_mlx(s.bits, s.group, s.rows, s.cols, 23u + static_cast<uint32_t>(s.cols));
  if (!ops::mlx_i16_supported(rows_of(w.m))) GTEST_SKIP() << "no int16 kernel for group " << s.group;
  for (const int64_t tokens : {int64_t{1}, int64_t{2}, int64_t{11}}) {
    const std::vector<float> x = test::normal_floats(tokens * s.cols, 29);
    ops::I16Activations a;
    ops::size_i16_activations(s.cols, tokens, /*pairs_split=*/s.bits == 4, a);
    ops::quantize_i16_activations(x.data(), 0, tokens, a);
    std::vector<std::vector<float>> per_target;
    test::for_each_simd_target([&] {
      std::vector<float> y(static_cast<size_t>(tokens * s.rows));
      ops::gemm_mlx_i16(rows_of(w.m), a, tokens, 0, s.rows, y.data(), s.rows);
      per_target.push_back(std::move(y));
    });
    for (size_t k = 1; k < per_target.size(); ++k)
      for (size_t i = 0; i < per_target[0].size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(per_target[k][i]), std::bit_cast<uint32_t>(per_target[0][i]))
            << tokens << " tokens, target " << k << ", output " << i;
  }
}

// The invariant chunked prefill rests on: token t alone gives the bits of token t among 37 (token
// tiles of 4 and a remainder, in the int16 path); so do calls of 2 and 19 tokens starting at token
// 13 (the row path's pairs, other tiles over the same tokens).
TEST_P(OpsMlxMatmul, OneTokenEqualsItsRowAmongMany) {
  const Shape s = GetParam();
  const MlxMatrix w = random_mlx(s.bits, s.group, s.rows, s.cols, 5u + static_cast<uint32_t>(s.rows));
  const int64_t tokens = 37;
  const std::vector<float> x = test::normal_floats(tokens * s.cols, 3);
  ThreadPool pool(2);
  std::vector<float> many(static_cast<size_t>(tokens * s.rows)), one(static_cast<size_t>(s.rows));
  test::for_each_simd_target([&] {
    ops::matmul(w.m, x.data(), tokens, many.data(), pool);
    for (int64_t t = 0; t < tokens; ++t) {
      ops::matmul(w.m, x.data() + t * s.cols, 1, one.data(), pool);
      for (int64_t r = 0; r < s.rows; ++r)
        ASSERT_EQ(std::bit_cast<uint32_t>(one[static_cast<size_t>(r)]),
                  std::bit_cast<uint32_t>(many[static_cast<size_t>(t * s.rows + r)]))
            << "token " << t << " row " << r;
    }
    for (const int64_t part : {int64_t{2}, int64_t{19}}) {
      std::vector<float> some(static_cast<size_t>(part * s.rows));
      ops::matmul(w.m, x.data() + 13 * s.cols, part, some.data(), pool);
      for (int64_t i = 0; i < part * s.rows; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(some[static_cast<size_t>(i)]),
                  std::bit_cast<uint32_t>(many[static_cast<size_t>(13 * s.rows + i)]))
            << part << " tokens from 13: " << i;
    }
  });
}

// A matrix of one row out of a larger one gives the same bits: rows are summed independently.
TEST_P(OpsMlxMatmul, RowsDoNotDependOnTheirNeighbours) {
  const Shape s = GetParam();
  const MlxMatrix w = random_mlx(s.bits, s.group, s.rows, s.cols, 9);
  const int64_t tokens = 21;
  const std::vector<float> x = test::normal_floats(tokens * s.cols, 4);
  ThreadPool pool(1);
  std::vector<float> all(static_cast<size_t>(tokens * s.rows)), last(static_cast<size_t>(tokens));
  // The last row alone: same words, scales and biases, viewed as a 1-row matrix.
  const int64_t r = s.rows - 1, groups = s.cols / s.group;
  Matrix one_row;
  one_row.format = w.m.format;
  one_row.rows = 1;
  one_row.cols = s.cols;
  one_row.group_size = s.group;
  one_row.data = w.m.data + r * static_cast<int64_t>(w.m.row_bytes());
  one_row.scales.assign(w.m.scales.begin() + r * groups, w.m.scales.begin() + (r + 1) * groups);
  one_row.biases.assign(w.m.biases.begin() + r * groups, w.m.biases.begin() + (r + 1) * groups);
  one_row.scales.resize(one_row.scales.size() + kMlxScalePadding, 0.0f);
  one_row.biases.resize(one_row.biases.size() + kMlxScalePadding, 0.0f);
  test::for_each_simd_target([&] {
    ops::matmul(w.m, x.data(), tokens, all.data(), pool);
    ops::matmul(one_row, x.data(), tokens, last.data(), pool);
    for (int64_t t = 0; t < tokens; ++t)
      EXPECT_EQ(last[static_cast<size_t>(t)], all[static_cast<size_t>(t * s.rows + r)]) << "token " << t;
  });
}

// Widths: a kernel block is 256 elements at 4 bits and 128 at 8, so 96, 224, 704 (the
// tiny-toolcaller FFN) and 1056 end mid-block; 512 fills it. Rows: 37 (tasks of 16 and a short
// one, tiles of 4 and a remainder), 3 (under one tile).
const Shape kShapes[] = {
    {4, 32, 37, 96},   {4, 32, 3, 1056}, {4, 64, 37, 704},  {4, 64, 5, 512},  {4, 128, 37, 1152}, {4, 128, 2, 384},
    {8, 32, 37, 224},  {8, 32, 4, 96},   {8, 64, 37, 704},  {8, 64, 3, 512},  {8, 128, 37, 1152}, {8, 128, 6, 384},
};

INSTANTIATE_TEST_SUITE_P(Shapes, OpsMlxMatmul, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const Shape& s = info.param;
  return "mlx" + std::to_string(s.bits) + "_g" + std::to_string(s.group) + "_" + std::to_string(s.rows) + "x" +
         std::to_string(s.cols);
});

}  // namespace
