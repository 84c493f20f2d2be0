// KV row formats: sizes, round-trip error bounds, and the Walsh-Hadamard rotation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "keel/kv/kv_format.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

using keel::KvFormat;
namespace kv = keel::kv;

namespace {

constexpr KvFormat kQuantized[] = {KvFormat::Int8, KvFormat::Int4, KvFormat::Int2};

std::vector<float> random_row(std::mt19937& rng, int64_t dim, float spread) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(dim));
  for (float& v : x) v = spread * normal(rng) + 0.1f * spread;  // off-centre, so zero points matter
  return x;
}

std::vector<float> round_trip(KvFormat f, const std::vector<float>& x, bool rotate) {
  const int64_t dim = static_cast<int64_t>(x.size());
  std::vector<uint8_t> row(kv::row_bytes(f, dim));
  kv::encode_kv_row(f, x.data(), dim, rotate, row.data());
  std::vector<float> y(x.size());
  kv::decode_kv_row(f, row.data(), dim, rotate, y.data());
  return y;
}

// Half the quantization step of one group, derived from the data alone: the stored scale is the
// ideal one rounded up to bf16 (at most 2^-7 relative more), and for affine formats the zero point
// is the minimum rounded down to bf16 (at most 2^-8 |min| lower), widening the range it covers.
double half_step(KvFormat f, const float* g) {
  double lo = g[0], hi = g[0], amax = 0;
  for (int i = 0; i < 32; ++i) {
    lo = std::min<double>(lo, g[i]);
    hi = std::max<double>(hi, g[i]);
    amax = std::max<double>(amax, std::fabs(g[i]));
  }
  const double widen = 1.0 + std::ldexp(1.0, -7);
  if (f == KvFormat::Int8) return amax / 127.0 * widen / 2;
  const int top = f == KvFormat::Int4 ? 15 : 3;
  return (hi - lo + std::ldexp(std::fabs(lo), -8)) / top * widen / 2;
}

double l2(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(s);
}

}  // namespace

TEST(KvFormat, NamesRoundTripAndRotationDefaults) {
  for (KvFormat f : keel::kAllKvFormats) EXPECT_EQ(kv::format_from_name(keel::kv_format_name(f)), f);
  EXPECT_EQ(kv::format_from_name("int2"), KvFormat::Int2);
  EXPECT_FALSE(kv::format_from_name("fp8").has_value());
  EXPECT_FALSE(kv::format_from_name("INT8").has_value());
  EXPECT_FALSE(kv::rotated_by_default(KvFormat::BF16));
  EXPECT_FALSE(kv::rotated_by_default(KvFormat::Int8));
  EXPECT_TRUE(kv::rotated_by_default(KvFormat::Int4));
  EXPECT_TRUE(kv::rotated_by_default(KvFormat::Int2));
}

TEST(KvFormat, RowBytesMatchTheCostTableAndEncodeWritesExactlyThat) {
  EXPECT_EQ(kv::row_bytes(KvFormat::BF16, 128), 256u);
  EXPECT_EQ(kv::row_bytes(KvFormat::Int8, 128), 136u);
  EXPECT_EQ(kv::row_bytes(KvFormat::Int4, 128), 80u);
  EXPECT_EQ(kv::row_bytes(KvFormat::Int2, 128), 48u);
  EXPECT_EQ(kv::row_bytes(KvFormat::Int2, 64), 16u + 2 * 4);
  std::mt19937 rng(1);
  for (KvFormat f : keel::kAllKvFormats) {
    for (int64_t dim : {32, 64, 96, 128, 256}) {
      EXPECT_EQ(kv::row_bytes(f, dim), static_cast<size_t>(keel::kv_vector_bytes(f, dim)));
      const auto x = random_row(rng, dim, 3.0f);
      const size_t n = kv::row_bytes(f, dim);
      std::vector<uint8_t> buf(n + 16, 0xAB);
      kv::encode_kv_row(f, x.data(), dim, kv::rotated_by_default(f), buf.data());
      for (size_t i = n; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xAB) << keel::kv_format_name(f) << " dim " << dim;
    }
  }
}

TEST(KvFormat, Bf16IsRoundToNearestEven) {
  std::mt19937 rng(2);
  const auto x = random_row(rng, 64, 100.0f);
  const auto y = round_trip(KvFormat::BF16, x, false);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], keel::bf16_to_float(keel::float_to_bf16(x[i])));
}

// Unrotated rows: every element within half a quantization step of its group (plus a few ulp).
TEST(KvFormat, RoundTripErrorWithinHalfAStepPerGroup) {
  std::mt19937 rng(3);
  for (KvFormat f : kQuantized) {
    for (int64_t dim : {64, 128}) {
      double worst_ratio = 0;
      for (float spread : {1e-3f, 0.5f, 4.0f, 300.0f}) {
        for (int trial = 0; trial < 20; ++trial) {
          const auto x = random_row(rng, dim, spread);
          const auto y = round_trip(f, x, false);
          for (int64_t g = 0; g < dim / 32; ++g) {
            const double bound = half_step(f, x.data() + g * 32);
            for (int64_t i = g * 32; i < g * 32 + 32; ++i) {
              const double err = std::fabs(static_cast<double>(x[i]) - y[i]);
              ASSERT_LE(err, bound + 1e-6 * std::fabs(x[i])) << keel::kv_format_name(f) << " x=" << x[i];
              worst_ratio = std::max(worst_ratio, err / bound);
            }
          }
        }
      }
      // The bound is tight: some element lands close to half a step away.
      EXPECT_GT(worst_ratio, 0.8) << keel::kv_format_name(f);
    }
  }
}

TEST(KvFormat, ZeroAndConstantRowsAreExact) {
  for (KvFormat f : keel::kAllKvFormats) {
    const std::vector<float> zeros(64, 0.0f), ones(64, 1.0f);
    EXPECT_EQ(round_trip(f, zeros, false), zeros) << keel::kv_format_name(f);
    // Affine formats store a constant group as its zero point with scale 0.
    if (f != KvFormat::Int8) {
      EXPECT_EQ(round_trip(f, ones, false), ones) << keel::kv_format_name(f);
    }
  }
}

// Rotated rows: the bound holds per element of the rotated row; the rotation is orthonormal, so the
// decoded row's L2 error is at most sqrt(sum over groups of 32 * half_step^2) of the rotated row.
TEST(KvFormat, RotatedRoundTripErrorWithinTheRotatedBound) {
  std::mt19937 rng(4);
  for (KvFormat f : kQuantized) {
    for (int64_t dim : {64, 96, 128}) {
      for (int trial = 0; trial < 30; ++trial) {
        const auto x = random_row(rng, dim, 2.0f);
        auto r = x;
        kv::rotate_row(r.data(), dim);
        double bound2 = 0;
        for (int64_t g = 0; g < dim / 32; ++g) bound2 += 32 * std::pow(half_step(f, r.data() + g * 32), 2);
        const auto y = round_trip(f, x, true);
        EXPECT_LE(l2(x, y), std::sqrt(bound2) * (1 + 1e-5) + 1e-5) << keel::kv_format_name(f) << " dim " << dim;
      }
    }
  }
}

TEST(KvFormat, FwhtIsItsOwnInverseAndKeepsNorms) {
  std::mt19937 rng(5);
  for (int64_t n = 1; n <= 512; n *= 2) {
    const auto x = random_row(rng, n, 1.0f);
    auto y = x;
    kv::fwht(y.data(), n);
    double nx = 0, ny = 0;
    for (int64_t i = 0; i < n; ++i) {
      nx += static_cast<double>(x[i]) * x[i];
      ny += static_cast<double>(y[i]) * y[i];
    }
    EXPECT_NEAR(std::sqrt(ny), std::sqrt(nx), 1e-5 * std::sqrt(nx)) << n;
    if (n >= 4) {
      EXPECT_GT(l2(x, y), 0.1) << "fwht of " << n << " did nothing";
    }
    kv::fwht(y.data(), n);
    EXPECT_LE(l2(x, y), 1e-5 * std::sqrt(nx)) << n;
  }
  // A unit vector spreads evenly: H e0 = (1, ..., 1) / sqrt(n).
  std::vector<float> e(128, 0.0f);
  e[0] = 1.0f;
  kv::fwht(e.data(), 128);
  for (float v : e) EXPECT_FLOAT_EQ(v, 1.0f / std::sqrt(128.0f));
  EXPECT_THROW(kv::fwht(e.data(), 96), keel::Error);
  EXPECT_THROW(kv::fwht(e.data(), 0), keel::Error);
}

TEST(KvFormat, RotateRowUsesPowerOfTwoBlocksAndInverts) {
  std::mt19937 rng(6);
  const auto x = random_row(rng, 96, 1.0f);
  auto y = x;
  kv::rotate_row(y.data(), 96);
  auto z = x;
  for (int b = 0; b < 3; ++b) kv::fwht(z.data() + 32 * b, 32);
  EXPECT_EQ(y, z);
  kv::rotate_row(y.data(), 96);
  EXPECT_LE(l2(x, y), 1e-5);
}

// An outlier channel sets the scale of its whole group; rotation spreads it over the row first.
TEST(KvFormat, RotationLowersInt4ErrorOnRowsWithOutliers) {
  std::mt19937 rng(7);
  // Int4 gains a lot; int2 (four levels) still gains, less.
  for (auto [f, factor] : {std::pair{KvFormat::Int4, 0.6}, std::pair{KvFormat::Int2, 0.9}}) {
    double plain = 0, rotated = 0;
    for (int trial = 0; trial < 50; ++trial) {
      auto x = random_row(rng, 128, 1.0f);
      x[static_cast<size_t>(trial % 128)] = 40.0f;  // one channel far outside the rest
      x[static_cast<size_t>((trial * 37 + 5) % 128)] = -25.0f;
      plain += l2(x, round_trip(f, x, false));
      rotated += l2(x, round_trip(f, x, true));
    }
    EXPECT_LT(rotated, factor * plain) << keel::kv_format_name(f) << " plain " << plain << " rotated " << rotated;
  }
}

TEST(KvFormat, QuantizedFormatsRejectDimsThatAreNotGroupMultiples) {
  std::vector<float> x(48, 1.0f), y(48);
  std::vector<uint8_t> row(256);
  for (KvFormat f : kQuantized) {
    EXPECT_THROW(kv::encode_kv_row(f, x.data(), 48, false, row.data()), keel::Error);
    EXPECT_THROW(kv::decode_kv_row(f, row.data(), 48, false, y.data()), keel::Error);
  }
  EXPECT_NO_THROW(kv::encode_kv_row(KvFormat::BF16, x.data(), 48, false, row.data()));
  EXPECT_THROW(kv::encode_kv_row(KvFormat::BF16, x.data(), 0, false, row.data()), keel::Error);
}
