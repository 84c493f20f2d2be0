// MXFP4 weights (gpt-oss experts): the e2m1 codes and e8m0 exponents decode to the values the
// OCP microscaling format defines, and a product reads the packed form with the same result for
// one token as for many (a decode step equals a prefill chunk, bit for bit).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "keel/ops/matmul.h"
#include "keel/util/half.h"

namespace {

using namespace keel;

// A (rows, cols) MXFP4 matrix over caller-owned bytes.
Matrix mxfp4(const std::vector<uint8_t>& codes, const std::vector<uint8_t>& exponents, int64_t rows, int64_t cols) {
  Matrix m;
  m.format = WeightFormat::MXFP4;
  m.rows = rows;
  m.cols = cols;
  m.data = codes.data();
  m.block_exponents = exponents.data();
  return m;
}

TEST(OpsMxfp4, CodesAndExponentsDecodeToTheirValues) {
  // One row of 64: code i (low nibble first) in element i of the first 16, exponents 2^0 and 2^-3.
  std::vector<uint8_t> codes(32, 0), exponents = {127, 124};
  for (int i = 0; i < 16; i += 2) codes[static_cast<size_t>(i / 2)] = static_cast<uint8_t>(i | ((i + 1) << 4));
  codes[16] = 0x7F;  // element 32: code 15 (-6); element 33: code 7 (6)
  const Matrix m = mxfp4(codes, exponents, 1, 64);
  std::vector<float> row(64);
  ops::decode_row(m, 0, row.data());
  const float expected[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(row[static_cast<size_t>(i)], expected[i]) << i;
  EXPECT_EQ(row[32], -6.0f / 8);
  EXPECT_EQ(row[33], 6.0f / 8);
  EXPECT_EQ(row[34], 0.0f);
}

// Rows and widths: 37 rows (tasks of 16 and a short one, tiles of 4 and a remainder); 96 and
// 2880 (gpt-oss's hidden size) columns, neither a multiple of the 128 elements a kernel loads at once.
class OpsMxfp4Shapes : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(OpsMxfp4Shapes, OneTokenEqualsManyAndMatchesTheDecodedRows) {
  const auto [rows, cols] = GetParam();
  std::mt19937 rng(3);
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols / 2)), exponents(static_cast<size_t>(rows * cols / 32));
  for (auto& c : codes) c = static_cast<uint8_t>(rng());
  for (auto& e : exponents) e = static_cast<uint8_t>(120 + rng() % 10);
  exponents[3] = 1;  // blocks of (near-)subnormal values: a kernel may flush them, never mix them up
  exponents[7] = 0;
  const Matrix m = mxfp4(codes, exponents, rows, cols);
  const int64_t tokens = 9;
  std::vector<float> x(static_cast<size_t>(tokens * cols));
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& v : x) v = u(rng);

  ThreadPool pool(2);
  std::vector<float> many(static_cast<size_t>(tokens * rows)), one(static_cast<size_t>(rows));
  ops::matmul(m, x.data(), tokens, many.data(), pool);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t t = 0; t < tokens; ++t) {
    ops::matmul(m, x.data() + t * cols, 1, one.data(), pool);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(one[static_cast<size_t>(r)], many[static_cast<size_t>(t * rows + r)]) << t << "," << r;
      ops::decode_row(m, r, row.data());
      // The kernels may round x to bf16 (as the bf16 path does): then they must match the rows
      // against the rounded x to float accumulation error, and the exact product to x's rounding.
      double exact = 0, rounded = 0, magnitude = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double w = row[static_cast<size_t>(c)];
        const float xv = x[static_cast<size_t>(t * cols + c)];
        exact += w * xv;
        rounded += w * bf16_to_float(float_to_bf16(xv));
        magnitude += std::abs(w * xv);
      }
      const double got = one[static_cast<size_t>(r)];
      EXPECT_TRUE(std::abs(got - exact) <= 1e-5 * (1 + magnitude) || std::abs(got - rounded) <= 1e-5 * (1 + magnitude))
          << t << "," << r << ": " << got << " vs " << exact << " or, x in bf16, " << rounded;
      EXPECT_LE(std::abs(got - exact), 4e-3 * magnitude + 1e-5) << t << "," << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RowsByCols, OpsMxfp4Shapes,
                         ::testing::Values(std::pair<int64_t, int64_t>{37, 96}, std::pair<int64_t, int64_t>{37, 2880},
                                           std::pair<int64_t, int64_t>{3, 160}));

}  // namespace
