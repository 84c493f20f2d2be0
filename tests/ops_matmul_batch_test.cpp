// ops::matmul_batch: several products in one loop of the pool give, job for job, the bits of
// ops::matmul called on each alone, whatever the mix (formats with and without prepared
// activations, inputs shared and not, one token and many), on every SIMD target.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "keel/ops/ggml_blocks.h"
#include "keel/ops/matmul.h"
#include "keel/util/half.h"
#include "guarded_bytes_support.h"
#include "simd_target_support.h"
#include "test_support.h"

namespace keel {
namespace {

// A matrix over owned bytes (ending at an unmapped page): random codes with small finite scales in
// every format used here.
struct OwnedMatrix {
  test::GuardedBytes bytes{0};
  Matrix m;
};

OwnedMatrix random_matrix(WeightFormat f, int64_t rows, int64_t cols, uint32_t seed) {
  OwnedMatrix o;
  o.m.name = std::string("batch.") + weight_format_name(f);
  o.m.format = f;
  o.m.rows = rows;
  o.m.cols = cols;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> small(-0.05f, 0.05f);
  if (f == WeightFormat::F32 || f == WeightFormat::BF16) {
    const size_t count = static_cast<size_t>(rows * cols);
    o.bytes = test::GuardedBytes(count * (f == WeightFormat::F32 ? 4 : 2));
    for (size_t i = 0; i < count; ++i) {
      const float v = small(rng);
      if (f == WeightFormat::F32) std::memcpy(o.bytes.data() + 4 * i, &v, 4);
      else {
        const uint16_t b = float_to_bf16(v);
        std::memcpy(o.bytes.data() + 2 * i, &b, 2);
      }
    }
  } else {
    const GgmlBlock g = ggml_block_size(f);
    o.bytes = test::GuardedBytes(static_cast<size_t>(rows * cols / g.elements * g.bytes));
    for (auto& b : o.bytes) b = static_cast<uint8_t>(rng());
    // Every f16 scale small and finite: the block's d (and Q4_K's dmin), at the format's place.
    const size_t scale_at = f == WeightFormat::Q6_K ? 208 : 0;
    const int scales = f == WeightFormat::Q4_K ? 2 : 1;
    for (size_t i = 0; i < o.bytes.size(); i += static_cast<size_t>(g.bytes))
      for (int k = 0; k < scales; ++k) {
        const uint16_t h = float_to_f16(1e-3f + 1e-3f * static_cast<float>(rng() % 8));
        std::memcpy(o.bytes.data() + i + scale_at + 2 * static_cast<size_t>(k), &h, 2);
      }
  }
  o.m.data = o.bytes.data();
  return o;
}

void expect_batch_equals_alone(const std::vector<ops::MatmulJob>& jobs, ThreadPool& pool) {
  std::vector<std::vector<float>> alone;
  for (const ops::MatmulJob& j : jobs) {
    alone.emplace_back(static_cast<size_t>(j.n_tokens * j.w->rows));
    ops::matmul(*j.w, j.x, j.n_tokens, alone.back().data(), pool);
    std::fill_n(j.y, j.n_tokens * j.w->rows, -1.0f);
  }
  ops::matmul_batch(jobs, pool);
  for (size_t k = 0; k < jobs.size(); ++k)
    for (size_t i = 0; i < alone[k].size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(jobs[k].y[i]), std::bit_cast<uint32_t>(alone[k][i]))
          << "job " << k << " (" << jobs[k].w->name << ", " << jobs[k].n_tokens << " tokens), output " << i;
}

TEST(OpsMatmulBatch, EachJobGetsTheBitsOfItsMatmulAlone) {
  const int64_t d = 256, ff = 96;
  // gate and up of two "experts" (one format pair each), a down matrix per expert, a K-format
  // matrix beside a 32-element one on the same input, and dense weights (no prepared activations).
  const OwnedMatrix gate0 = random_matrix(WeightFormat::Q4_0, ff, d, 1), up0 = random_matrix(WeightFormat::Q4_0, ff, d, 2);
  const OwnedMatrix gate1 = random_matrix(WeightFormat::Q4_K, ff, d, 3), up1 = random_matrix(WeightFormat::Q6_K, ff, d, 4);
  const OwnedMatrix down0 = random_matrix(WeightFormat::Q8_0, d, ff, 5), down1 = random_matrix(WeightFormat::Q4_0, d, ff, 6);
  const OwnedMatrix dense_f32 = random_matrix(WeightFormat::F32, 40, d, 7), dense_bf16 = random_matrix(WeightFormat::BF16, 33, d, 8);
  ThreadPool pool(2);
  test::for_each_simd_target([&] {
    for (const int64_t tokens : {int64_t{1}, int64_t{3}, int64_t{21}}) {
      SCOPED_TRACE(std::to_string(tokens) + " tokens");
      const std::vector<float> x = test::normal_floats(tokens * d, 11), x_other = test::normal_floats(tokens * d, 12);
      const std::vector<float> h0 = test::normal_floats(tokens * ff, 13), h1 = test::normal_floats(tokens * ff, 14);
      std::vector<std::vector<float>> y(8);
      auto out = [&](size_t k, const Matrix& m) { return (y[k].resize(static_cast<size_t>(tokens * m.rows)), y[k].data()); };
      const std::vector<ops::MatmulJob> first = {
          {&gate0.m, x.data(), tokens, out(0, gate0.m)},        {&up0.m, x.data(), tokens, out(1, up0.m)},
          {&gate1.m, x.data(), tokens, out(2, gate1.m)},        {&up1.m, x_other.data(), tokens, out(3, up1.m)},
          {&dense_f32.m, x.data(), tokens, out(4, dense_f32.m)}, {&dense_bf16.m, x.data(), tokens, out(5, dense_bf16.m)}};
      expect_batch_equals_alone(first, pool);
      const std::vector<ops::MatmulJob> second = {{&down0.m, h0.data(), tokens, out(6, down0.m)},
                                                  {&down1.m, h1.data(), tokens, out(7, down1.m)}};
      expect_batch_equals_alone(second, pool);
    }
  });
}

// Jobs without tokens or rows are skipped; a batch of none does nothing.
TEST(OpsMatmulBatch, EmptyJobsAreSkipped) {
  const OwnedMatrix w = random_matrix(WeightFormat::Q4_0, 16, 64, 1);
  Matrix no_rows;
  no_rows.name = "batch.empty";
  no_rows.format = WeightFormat::Q4_0;
  no_rows.cols = 64;
  ThreadPool pool(2);
  const std::vector<float> x = test::normal_floats(2 * 64, 3);
  std::vector<float> y(2 * 16), nothing(1, 7.0f);
  const std::vector<ops::MatmulJob> jobs = {
      {&w.m, x.data(), 0, nothing.data()}, {&no_rows, x.data(), 2, nothing.data()}, {&w.m, x.data(), 2, y.data()}};
  expect_batch_equals_alone(jobs, pool);
  EXPECT_EQ(nothing[0], 7.0f);
  ops::matmul_batch({}, pool);
}

}  // namespace
}  // namespace keel
