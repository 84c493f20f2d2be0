// Gated DeltaNet (Qwen3-Next's linear attention, keel/ops/gated_delta_rule.h): the tiled kernel
// gives the outputs of the token-by-token recurrence (an independent double-precision copy of
// Hugging Face transformers' torch_recurrent_gated_delta_rule), and gives the same bits however a
// sequence's tokens are split into calls: in one pass, in chunks, one at a time, resumed from a
// snapshot saved at a tile boundary, or rerun after a rewind inside the tile. That bit-exactness is
// what the tile form is for: a prefix reused through a snapshot continues exactly as if the whole
// sequence had run at once. Also: the causal conv + SiLU against its direct formula, and the L2 norm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "keel/ops/gated_delta_rule.h"
#include "keel/util/error.h"

namespace {

using namespace keel;
using ops::kDeltaTile;
using ops::LinearAttentionShape;
using ops::LinearLayerState;

struct ShapeCase {
  const char* name;
  LinearAttentionShape shape;  // key heads, value heads, key dim, value dim, conv kernel
};

const ShapeCase kShapes[] = {
    {"2 key heads, 4 value heads, 16 x 16", {2, 4, 16, 16, 4}},
    {"1 key head, 2 value heads, 64 x 32", {1, 2, 64, 32, 4}},
};

// One sequence's inputs to one layer, laid out as the model has them: each token's row of
// conv_channels() floats is [q | k | v] (so the q, k and v strides are the row's width).
struct Sequence {
  LinearAttentionShape shape;
  int64_t tokens = 0;
  std::vector<float> x;       // (tokens, channels): the conv's inputs
  std::vector<float> weight;  // (channels, conv_kernel), oldest tap first
  std::vector<float> qkv;     // (tokens, channels): q and k L2-normalised, q also scaled by 1/sqrt(key_dim)
  std::vector<float> g;       // (tokens, value_heads): log decay, -exp(A) softplus(a)
  std::vector<float> beta;    // (tokens, value_heads): sigmoid of a random logit
};

Sequence make_sequence(const LinearAttentionShape& shape, int64_t tokens, uint32_t seed) {
  Sequence seq;
  seq.shape = shape;
  seq.tokens = tokens;
  const int64_t c = shape.conv_channels(), dk = shape.key_dim, vh = shape.value_heads;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f), half(-0.5f, 0.5f);
  seq.x.resize(static_cast<size_t>(tokens * c));
  for (auto& v : seq.x) v = unit(rng);
  seq.weight.resize(static_cast<size_t>(c * shape.conv_kernel));
  for (auto& w : seq.weight) w = half(rng);
  seq.qkv.resize(static_cast<size_t>(tokens * c));
  for (auto& v : seq.qkv) v = normal(rng);
  // L2-normalise each q and k head (in double, independently of ops::l2_normalize), q also scaled.
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t kh = 0; kh < shape.key_heads; ++kh) {
        float* row = seq.qkv.data() + t * c + (part * shape.key_heads + kh) * dk;
        double sum = 0;
        for (int64_t a = 0; a < dk; ++a) sum += static_cast<double>(row[a]) * row[a];
        const double scale = (part == 0 ? 1.0 / std::sqrt(static_cast<double>(dk)) : 1.0) / std::sqrt(sum + 1e-6);
        for (int64_t a = 0; a < dk; ++a) row[a] = static_cast<float>(row[a] * scale);
      }
  // exp(A) from 0.006 (first value head) to 1.5 (last), softplus(a) in [0.31, 1.31]: decay rates
  // -g from about 0.002 to about 2 per token.
  seq.g.resize(static_cast<size_t>(tokens * vh));
  seq.beta.resize(static_cast<size_t>(tokens * vh));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < vh; ++h) {
      const double rate = 0.006 * std::pow(1.5 / 0.006, vh == 1 ? 0.0 : static_cast<double>(h) / (vh - 1));
      const double a = unit(rng);
      seq.g[static_cast<size_t>(t * vh + h)] = static_cast<float>(-rate * std::log1p(std::exp(a)));
      seq.beta[static_cast<size_t>(t * vh + h)] = static_cast<float>(1.0 / (1.0 + std::exp(-normal(rng))));
    }
  return seq;
}

struct Outputs {
  explicit Outputs(const Sequence& seq)
      : conv(static_cast<size_t>(seq.tokens * seq.shape.conv_channels()), std::numeric_limits<float>::quiet_NaN()),
        attn(static_cast<size_t>(seq.tokens * seq.shape.value_heads * seq.shape.value_dim),
             std::numeric_limits<float>::quiet_NaN()) {}
  std::vector<float> conv;  // (tokens, channels)
  std::vector<float> attn;  // (tokens, value_heads * value_dim)
};

// The calling protocol for one piece of n tokens at the state's position (inside its tile): the conv,
// every value head (value head h reads key head h / (value_heads / key_heads)), then advance().
void run_piece(LinearLayerState& state, const Sequence& seq, int64_t n, Outputs& out, bool heads_on_threads = false) {
  const LinearAttentionShape& s = seq.shape;
  const int64_t pos = state.position(), c = s.conv_channels(), dk = s.key_dim, dv = s.value_dim;
  const int64_t vh = s.value_heads, width = vh * dv, group = s.value_heads / s.key_heads;
  ops::causal_conv_silu(state, seq.weight.data(), seq.x.data() + pos * c, n, out.conv.data() + pos * c);
  const int64_t filled = state.filled();
  const float* row = seq.qkv.data() + pos * c;
  auto head = [&](int64_t h) {
    const int64_t kh = h / group;
    ops::delta_rule_head(state, h, filled, n, row + kh * dk, row + (s.key_heads + kh) * dk, c,
                         row + 2 * s.key_heads * dk + h * dv, c, seq.g.data() + pos * vh + h,
                         seq.beta.data() + pos * vh + h, vh, out.attn.data() + pos * width + h * dv, width);
  };
  if (heads_on_threads) {
    std::vector<std::thread> threads;
    for (int64_t h = 0; h < vh; ++h) threads.emplace_back(head, h);
    for (auto& t : threads) t.join();
  } else {
    for (int64_t h = 0; h < vh; ++h) head(h);
  }
  state.advance(n);
}

// Runs the tokens from the state's position up to `end` in chunks of chunk() tokens, each chunk split
// into pieces at the tile boundaries it crosses.
void run(LinearLayerState& state, const Sequence& seq, int64_t end, Outputs& out, const std::function<int64_t()>& chunk,
         bool heads_on_threads = false) {
  while (state.position() < end) {
    int64_t left = std::min(chunk(), end - state.position());
    while (left > 0) {
      const int64_t n = std::min(left, kDeltaTile - state.filled());
      run_piece(state, seq, n, out, heads_on_threads);
      left -= n;
    }
  }
}

std::function<int64_t()> whole() {
  return [] { return std::numeric_limits<int64_t>::max(); };
}
std::function<int64_t()> one_at_a_time() {
  return [] { return int64_t{1}; };
}
std::function<int64_t()> random_chunks(uint32_t seed) {
  return [rng = std::mt19937(seed)]() mutable { return std::uniform_int_distribution<int64_t>(1, 37)(rng); };
}

std::vector<float> snapshot(const LinearLayerState& state) {
  std::vector<float> buf(static_cast<size_t>(state.shape().snapshot_floats()));
  state.save(buf.data());
  return buf;
}

// The first float of [begin, end) whose bits differ between a and b, or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i)
    if (std::memcmp(&a[static_cast<size_t>(i)], &b[static_cast<size_t>(i)], sizeof(float)) != 0) return i;
  return -1;
}

// Both outputs of tokens [begin, end) carry the same bits in a and b.
void expect_same_outputs(const Sequence& seq, const Outputs& a, const Outputs& b, int64_t begin, int64_t end) {
  const int64_t c = seq.shape.conv_channels(), width = seq.shape.value_heads * seq.shape.value_dim;
  const int64_t conv = first_difference(a.conv, b.conv, begin * c, end * c);
  EXPECT_EQ(conv, -1) << "conv output differs first at token " << conv / c << ", channel " << conv % c;
  const int64_t attn = first_difference(a.attn, b.attn, begin * width, end * width);
  EXPECT_EQ(attn, -1) << "attention output differs first at token " << attn / width << ", value head "
                      << attn % width / seq.shape.value_dim;
}

void expect_same_state(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  const int64_t at = first_difference(a, b, 0, static_cast<int64_t>(a.size()));
  EXPECT_EQ(at, -1) << "snapshot float " << at << " differs";
}

// (tokens, value_heads * value_dim) in double: torch_recurrent_gated_delta_rule token by token, per
// value head with S (key_dim, value_dim) from zero: S *= exp(g); kv_mem = S^T k; delta = (v - kv_mem)
// beta; S += k delta^T; o = S^T q.
std::vector<double> reference_delta_rule(const Sequence& seq) {
  const LinearAttentionShape& s = seq.shape;
  const int64_t c = s.conv_channels(), dk = s.key_dim, dv = s.value_dim, vh = s.value_heads;
  const int64_t group = s.value_heads / s.key_heads;
  std::vector<double> out(static_cast<size_t>(seq.tokens * vh * dv));
  std::vector<std::vector<double>> state(static_cast<size_t>(vh), std::vector<double>(static_cast<size_t>(dk * dv)));
  std::vector<double> delta(static_cast<size_t>(dv));
  for (int64_t t = 0; t < seq.tokens; ++t)
    for (int64_t h = 0; h < vh; ++h) {
      const float* row = seq.qkv.data() + t * c;
      const float* q = row + (h / group) * dk;
      const float* k = row + (s.key_heads + h / group) * dk;
      const float* v = row + 2 * s.key_heads * dk + h * dv;
      const double decay = std::exp(static_cast<double>(seq.g[static_cast<size_t>(t * vh + h)]));
      const double beta = seq.beta[static_cast<size_t>(t * vh + h)];
      std::vector<double>& S = state[static_cast<size_t>(h)];
      for (double& x : S) x *= decay;
      for (int64_t i = 0; i < dv; ++i) {
        double kv_mem = 0;
        for (int64_t a = 0; a < dk; ++a) kv_mem += S[static_cast<size_t>(a * dv + i)] * k[a];
        delta[static_cast<size_t>(i)] = (v[i] - kv_mem) * beta;
      }
      for (int64_t a = 0; a < dk; ++a)
        for (int64_t i = 0; i < dv; ++i) S[static_cast<size_t>(a * dv + i)] += k[a] * delta[static_cast<size_t>(i)];
      for (int64_t i = 0; i < dv; ++i) {
        double o = 0;
        for (int64_t a = 0; a < dk; ++a) o += S[static_cast<size_t>(a * dv + i)] * q[a];
        out[static_cast<size_t>((t * vh + h) * dv + i)] = o;
      }
    }
  return out;
}

TEST(GatedDeltaRule, TileFormMatchesTheSequentialRecurrence) {
  for (const ShapeCase& sc : kShapes) {
    SCOPED_TRACE(sc.name);
    const Sequence seq = make_sequence(sc.shape, 133, 11);  // 8 full tiles and 5 tokens of a ninth
    LinearLayerState state(sc.shape);
    Outputs out(seq);
    run(state, seq, seq.tokens, out, random_chunks(5));  // chunks that cross tile boundaries
    const std::vector<double> expected = reference_delta_rule(seq);
    double worst = 0, largest = 0;
    int64_t worst_at = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const double diff = std::fabs(out.attn[i] - expected[i]);
      if (!(diff <= worst)) worst = diff, worst_at = static_cast<int64_t>(i);
      largest = std::max(largest, std::fabs(expected[i]));
    }
    const int64_t width = sc.shape.value_heads * sc.shape.value_dim;
    EXPECT_LT(worst, 1e-4) << "at token " << worst_at / width << ", value head " << worst_at % width / sc.shape.value_dim;
    EXPECT_GT(largest, 0.05);  // the outputs are not all (near) zero
    std::printf("[ delta    ] %s: largest output %.3g, largest difference from the recurrence %.3g\n", sc.name, largest,
                worst);
  }
}

TEST(GatedDeltaRule, SameBitsWhateverTheChunking) {
  for (const ShapeCase& sc : kShapes) {
    SCOPED_TRACE(sc.name);
    const Sequence seq = make_sequence(sc.shape, 7 * kDeltaTile, 12);
    LinearLayerState one_pass(sc.shape);
    Outputs expected(seq);
    run(one_pass, seq, seq.tokens, expected, whole());
    const std::vector<float> final_state = snapshot(one_pass);

    struct Schedule {
      std::string name;
      std::function<int64_t()> chunk;
      bool heads_on_threads = false;
    };
    const Schedule schedules[] = {
        {"one token at a time", one_at_a_time()},
        {"random chunks (seed 1)", random_chunks(1)},
        {"random chunks (seed 2)", random_chunks(2)},
        {"random chunks (seed 3)", random_chunks(3)},
        {"one pass, heads on their own threads", whole(), true},
    };
    for (const Schedule& schedule : schedules) {
      SCOPED_TRACE(schedule.name);
      LinearLayerState state(sc.shape);
      Outputs out(seq);
      run(state, seq, seq.tokens, out, schedule.chunk, schedule.heads_on_threads);
      expect_same_outputs(seq, expected, out, 0, seq.tokens);
      expect_same_state(final_state, snapshot(state));
    }
  }
}

TEST(GatedDeltaRule, RunFromASnapshotGivesTheSameBits) {
  for (const ShapeCase& sc : kShapes) {
    SCOPED_TRACE(sc.name);
    const Sequence seq = make_sequence(sc.shape, 3 * kDeltaTile, 13);
    LinearLayerState first(sc.shape);
    Outputs expected(seq);
    run(first, seq, 2 * kDeltaTile, expected, random_chunks(4));  // its last advance() reaches 32
    const std::vector<float> saved = snapshot(first);
    run(first, seq, seq.tokens, expected, random_chunks(5));
    const std::vector<float> final_state = snapshot(first);

    // Restored into a fresh state, and into one that was halfway through a tile of another sequence.
    for (const bool fresh : {true, false}) {
      SCOPED_TRACE(fresh ? "fresh state" : "state reused from another sequence");
      LinearLayerState state(sc.shape);
      if (!fresh) {
        const Sequence other = make_sequence(sc.shape, 21, 99);
        Outputs scratch(other);
        run(state, other, other.tokens, scratch, whole());
      }
      state.restore(saved.data(), 2 * kDeltaTile);
      EXPECT_EQ(state.position(), 2 * kDeltaTile);
      Outputs out(seq);
      run(state, seq, seq.tokens, out, random_chunks(6));
      expect_same_outputs(seq, expected, out, 2 * kDeltaTile, seq.tokens);
      expect_same_state(final_state, snapshot(state));
    }
  }
}

TEST(GatedDeltaRule, RewindInsideTheTileRerunsTheSameBits) {
  for (const ShapeCase& sc : kShapes) {
    SCOPED_TRACE(sc.name);
    const Sequence seq = make_sequence(sc.shape, 3 * kDeltaTile, 14);
    const Sequence draft = make_sequence(sc.shape, 3 * kDeltaTile, 15);  // tokens a rewind takes back
    LinearLayerState straight(sc.shape);
    Outputs expected(seq);
    run(straight, seq, seq.tokens, expected, whole());
    const std::vector<float> final_state = snapshot(straight);

    // 40 tokens, then back to 35, to the tile's start (32) or nowhere (40); the tokens taken back were
    // either the sequence's own or different ones (a rejected draft).
    for (const int64_t target : {int64_t{35}, 2 * kDeltaTile, int64_t{40}})
      for (const bool rejected_draft : {false, true}) {
        if (target == 40 && rejected_draft) continue;  // nothing taken back
        SCOPED_TRACE("rewound to " + std::to_string(target) + (rejected_draft ? " after draft tokens" : ""));
        LinearLayerState state(sc.shape);
        Outputs out(seq), scratch(draft);
        run(state, seq, target, out, random_chunks(7));
        if (rejected_draft) run(state, draft, 40, scratch, one_at_a_time());
        else run(state, seq, 40, out, whole());
        state.rewind(target);
        EXPECT_EQ(state.position(), target);
        run(state, seq, seq.tokens, out, random_chunks(8));
        expect_same_outputs(seq, expected, out, target, seq.tokens);
        expect_same_state(final_state, snapshot(state));
      }

    // Outside the current tile: before its start, past the position, and back across a boundary the
    // state has completed.
    LinearLayerState state(sc.shape);
    Outputs out(seq);
    run(state, seq, 40, out, whole());
    EXPECT_THROW(state.rewind(31), InternalError);
    EXPECT_THROW(state.rewind(41), InternalError);
    EXPECT_EQ(state.position(), 40);
    run(state, seq, 3 * kDeltaTile, out, whole());
    EXPECT_THROW(state.rewind(3 * kDeltaTile - 1), InternalError);
    EXPECT_EQ(state.position(), 3 * kDeltaTile);
  }
}

TEST(GatedDeltaRule, ConvMatchesTheDirectFormulaAcrossTiles) {
  for (const ShapeCase& sc : kShapes) {
    SCOPED_TRACE(sc.name);
    const Sequence seq = make_sequence(sc.shape, 50, 16);
    LinearLayerState state(sc.shape);
    Outputs out(seq);
    run(state, seq, seq.tokens, out, random_chunks(9));
    const int64_t c = sc.shape.conv_channels(), taps = sc.shape.conv_kernel;
    double worst = 0;
    for (int64_t t = 0; t < seq.tokens; ++t)
      for (int64_t ch = 0; ch < c; ++ch) {
        double sum = 0;
        for (int64_t i = 0; i < taps; ++i) {
          const int64_t at = t - (taps - 1) + i;
          if (at >= 0)
            sum += static_cast<double>(seq.weight[static_cast<size_t>(ch * taps + i)]) * seq.x[static_cast<size_t>(at * c + ch)];
        }
        const double expected = sum / (1.0 + std::exp(-sum));
        const double diff = std::fabs(out.conv[static_cast<size_t>(t * c + ch)] - expected);
        if (!(diff <= worst)) worst = diff;
        ASSERT_LT(diff, 1e-6) << "token " << t << ", channel " << ch;
      }
    std::printf("[ conv     ] %s: largest difference from the formula %.3g\n", sc.name, worst);
  }
}

TEST(GatedDeltaRule, L2NormalizeGivesUnitNormWithTheEpsilonInsideTheRoot) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int64_t n : {int64_t{16}, int64_t{64}, int64_t{128}})
    for (const float scale : {1e-4f, 1.0f, 1e3f}) {
      SCOPED_TRACE("size " + std::to_string(n) + ", scale " + std::to_string(scale));
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = scale * normal(rng);
      double sum = 0;
      for (const float v : x) sum += static_cast<double>(v) * v;
      const double inv = 1.0 / std::sqrt(sum + 1e-6);
      std::vector<float> y = x;
      ops::l2_normalize(y.data(), n);
      double norm = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        EXPECT_NEAR(y[i], x[i] * inv, 1e-6) << i;
        norm += static_cast<double>(y[i]) * y[i];
      }
      // Unit norm, less where the 1e-6 is comparable with the sum of squares (scale 1e-4: norm ~ 0.4-0.8).
      EXPECT_NEAR(std::sqrt(norm), std::sqrt(sum / (sum + 1e-6)), 1e-6);
      if (scale >= 1.0f) {
        EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-6);
      }
    }
  std::vector<float> zero(16, 0.0f);
  ops::l2_normalize(zero.data(), 16);
  for (const float v : zero) EXPECT_EQ(v, 0.0f);
}

TEST(GatedDeltaRule, CallsAcrossATileBoundaryThrow) {
  const LinearAttentionShape shape = kShapes[0].shape;
  const Sequence seq = make_sequence(shape, 2 * kDeltaTile, 18);
  LinearLayerState state(shape);
  Outputs out(seq);
  run(state, seq, 10, out, whole());
  std::vector<float> scratch(static_cast<size_t>(kDeltaTile * shape.conv_channels()));
  EXPECT_THROW(ops::causal_conv_silu(state, seq.weight.data(), seq.x.data(), 7, scratch.data()), InternalError);
  EXPECT_THROW(ops::delta_rule_head(state, 0, state.filled(), 7, seq.qkv.data(), seq.qkv.data(), shape.conv_channels(),
                                    seq.qkv.data(), shape.conv_channels(), seq.g.data(), seq.beta.data(),
                                    shape.value_heads, scratch.data(), shape.value_dim),
               InternalError);
  EXPECT_THROW(state.advance(7), InternalError);
  std::vector<float> buf(static_cast<size_t>(shape.snapshot_floats()));
  EXPECT_THROW(state.save(buf.data()), InternalError);
  EXPECT_THROW(state.restore(buf.data(), 10), InternalError);
  EXPECT_EQ(state.position(), 10);
  EXPECT_THROW(LinearLayerState({2, 3, 16, 16, 4}), Error);  // value heads not a multiple of key heads
}

}  // namespace
