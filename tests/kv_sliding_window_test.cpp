// Sliding-window layers in the paged KV pool: they keep only the blocks their window reaches, so
// their bytes stop growing while full-attention layers grow; attention over what they keep equals
// attention over every row with the same window, under every policy, chunked or not; the prefix
// cache and trims stay exact (a cached block whose window rows are gone is reused only where no
// query reads them); and the pool refuses layers it cannot store, naming them.
//
// The model is a weightless toy decoder over the KvCache interface, so these tests pin down the
// pool alone: each layer stores K and V made from every token's hidden vector, attends with each
// query head, and adds the result back, so what one layer reads decides what every later layer
// stores, as in a real transformer. Any row read wrongly or from the wrong form changes the output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "keel/kv/kv_footprint.h"
#include "keel/kv/kv_pool.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel::kv {
namespace {

using chat::Role;

constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 32, kHidden = kKvHeads * kHeadDim;
constexpr int64_t kBudget = int64_t{64} << 20;

ModelSpec toy_spec(const std::vector<AttentionKind>& kinds, int64_t window) {
  ModelSpec s;
  s.model_type = "toy";
  s.num_layers = static_cast<int64_t>(kinds.size());
  s.num_heads = kHeads;
  s.num_kv_heads = kKvHeads;
  s.head_dim = kHeadDim;
  s.hidden_size = kHidden;
  s.max_position = 4096;
  for (AttentionKind kind : kinds) {
    LayerSpec l;
    l.attention = kind;
    l.window = kind == AttentionKind::Sliding ? window : 0;
    l.num_heads = kHeads;
    l.num_kv_heads = kKvHeads;
    l.head_dim = kHeadDim;
    s.layers.push_back(l);
  }
  return s;
}

constexpr auto S = AttentionKind::Sliding, F = AttentionKind::Full;

// The toy decoder; `windows` holds each layer's attention window (0: every position).
class ToyModel {
 public:
  explicit ToyModel(std::vector<int64_t> windows) : windows_(std::move(windows)) {}

  // Runs `tokens` at positions [cache.size(), ...) and returns the last one's hidden vector.
  std::vector<float> forward(std::span<const int32_t> tokens, KvCache& cache) const {
    const auto n = static_cast<int64_t>(tokens.size());
    const int64_t pos0 = cache.size();
    std::vector<float> x(static_cast<size_t>(n * kHidden));  // (n, hidden)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < kHidden; ++i)
        x[static_cast<size_t>(t * kHidden + i)] = std::sin(0.37f * static_cast<float>(tokens[static_cast<size_t>(t)]) +
                                                          1.3f * static_cast<float>(i));
    std::vector<float> k(kHidden), v(kHidden), q(kHeadDim);
    std::vector<float> attn(static_cast<size_t>(n * kHeads * kHeadDim));  // (n, heads, head_dim)
    for (int64_t layer = 0; layer < static_cast<int64_t>(windows_.size()); ++layer) {
      for (int64_t t = 0; t < n; ++t) {
        const float* xt = x.data() + t * kHidden;
        for (int64_t j = 0; j < kHidden; ++j) {
          k[static_cast<size_t>(j)] = xt[(j + 5 * layer) % kHidden];
          v[static_cast<size_t>(j)] = std::tanh(xt[(3 * j + layer) % kHidden] + 0.1f * static_cast<float>(layer));
        }
        cache.store(layer, pos0 + t, k.data(), v.data());
      }
      const ops::AttentionParams params{.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim)),
                                        .window = windows_[static_cast<size_t>(layer)]};
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < kHeads; ++h) {
          for (int64_t i = 0; i < kHeadDim; ++i) q[static_cast<size_t>(i)] = 1.7f * x[static_cast<size_t>(t * kHidden + (7 * h + i) % kHidden)];
          cache.attend_one(layer, ops::kv_head_of(h, kHeads, kKvHeads), q.data(), pos0 + t, params,
                           attn.data() + (t * kHeads + h) * kHeadDim);
        }
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < kHidden; ++i) {
          const float* a = attn.data() + t * kHeads * kHeadDim;
          x[static_cast<size_t>(t * kHidden + i)] += 0.5f * (a[i] + a[i + kHidden]);
        }
    }
    cache.set_size(pos0 + n);
    return std::vector<float>(x.end() - kHidden, x.end());
  }

 private:
  std::vector<int64_t> windows_;
};

std::vector<int64_t> windows_of(const ModelSpec& s) {
  std::vector<int64_t> w;
  for (const LayerSpec& l : s.layers) w.push_back(l.attention == AttentionKind::Sliding ? l.window : 0);
  return w;
}

struct Conversation {
  std::vector<int32_t> ids;
  std::vector<Role> roles;
  int64_t size() const { return static_cast<int64_t>(ids.size()); }
  Conversation prefix(int64_t n) const {
    return {std::vector<int32_t>(ids.begin(), ids.begin() + n), std::vector<Role>(roles.begin(), roles.begin() + n)};
  }
};

// Appends `n` random tokens in runs of one role each (1 to 40 tokens per run).
void add_random_turns(Conversation& c, std::mt19937& rng, int64_t n) {
  std::uniform_int_distribution<int32_t> token(0, 999);
  std::uniform_int_distribution<int> role(0, static_cast<int>(chat::kRoleCount) - 1), run(1, 40);
  const int64_t end = c.size() + n;
  while (c.size() < end) {
    const auto r = static_cast<Role>(role(rng));
    for (int i = run(rng); i > 0 && c.size() < end; --i) {
      c.ids.push_back(token(rng));
      c.roles.push_back(r);
    }
  }
}

// Runs c's tokens from seq.size() on, `chunk` per forward pass; the output after the last one.
std::vector<float> run_rest(const ToyModel& model, KvSequence& seq, const Conversation& c, int64_t chunk) {
  std::vector<float> out;
  for (int64_t at = seq.size(); at < c.size(); at += chunk) {
    const auto len = static_cast<size_t>(std::min(chunk, c.size() - at));
    const auto ids = std::span<const int32_t>(c.ids).subspan(static_cast<size_t>(at), len);
    seq.append_tokens(ids, std::span<const Role>(c.roles).subspan(static_cast<size_t>(at), len));
    seq.pool().make_room(seq.prepare_pass());
    out = model.forward(ids, seq);
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A fresh pool with nothing cached, one pass: what every reuse must reproduce bit for bit.
std::vector<float> fresh(const ModelSpec& spec, const KvPolicy& policy, const Conversation& c) {
  KvPool pool(spec, kBudget, policy, true);
  auto seq = pool.open(c.ids, c.roles);
  EXPECT_EQ(seq->size(), 0);
  return run_rest(ToyModel(windows_of(spec)), *seq, c, c.size());
}

std::vector<KvPolicy> policies() {
  return {KvPolicy::parse("full"), KvPolicy::parse("int8"), KvPolicy::parse("int4"),
          KvPolicy::parse("protect").with_recent(32),
          // A recent window narrower than the sliding window: sliding layers read quantized rows too.
          KvPolicy::parse("default=int4 tool_call=int8 sink=4 recent=8")};
}

TEST(KvSlidingWindow, SlidingLayersHoldOnlyTheirWindowWhileFullLayersGrow) {
  const ModelSpec spec = toy_spec({S, S, F, S}, 20);
  const KvBlockLayout layout(spec);
  ASSERT_EQ(layout.group_count(), 2);
  const auto full_block = static_cast<int64_t>(layout.group_bytes(1, KvFormat::BF16));
  const auto sliding_block = static_cast<int64_t>(layout.group_bytes(0, KvFormat::BF16));
  const ToyModel model(windows_of(spec));
  std::mt19937 rng(31);
  Conversation c;
  add_random_turns(c, rng, 480);
  for (const KvPolicy& policy : policies()) {
    SCOPED_TRACE(policy.describe());
    KvPool pool(spec, kBudget, policy, true);
    auto seq = pool.open({}, {});
    int64_t before = 0;
    for (int64_t n = 16; n <= c.size(); n += 16) {
      run_rest(model, *seq, c.prefix(n), 16);
      const int64_t used = pool.stats().used_bytes;
      // Exactly what the footprint arithmetic (and so the planner) says one sequence holds.
      EXPECT_EQ(used, kv_sequence_bytes(spec, policy, c.prefix(n).roles)) << n;
      if (policy == KvPolicy::parse("full")) {
        // Past the first window each block adds only the full layer's rows; the sliding layers
        // hold at most 4 blocks (window 20, one block kept for the next turn, partial blocks).
        if (n >= 64) {
          EXPECT_EQ(used - before, full_block) << n;
        }
        EXPECT_LE(used - n / 16 * full_block, 4 * sliding_block) << n;
      }
      before = used;
    }
    EXPECT_EQ(pool.stats().requantizations, 0);
  }
  // The same tokens with every layer full: the whole context in every layer.
  KvPool all(toy_spec({F, F, F, F}, 0), kBudget, KvPolicy::parse("full"), true);
  auto seq = all.open(c.ids, c.roles);
  run_rest(ToyModel(windows_of(spec)), *seq, c, 64);
  EXPECT_EQ(all.stats().used_bytes, 30 * (full_block + sliding_block));
}

TEST(KvSlidingWindow, AttentionOverThePoolEqualsAttentionOverAllRows) {
  std::mt19937 rng(32);
  Conversation c;
  add_random_turns(c, rng, 300);
  for (int64_t window : {8, 20, 40}) {
    const ModelSpec sliding = toy_spec({S, S, F, S}, window);
    const ModelSpec all_full = toy_spec({F, F, F, F}, 0);
    const ToyModel model(windows_of(sliding));  // the same windows over both pools
    for (const KvPolicy& policy : policies()) {
      SCOPED_TRACE("window " + std::to_string(window) + " / " + policy.describe());
      KvPool reference_pool(all_full, kBudget, policy, true);
      auto reference_seq = reference_pool.open(c.ids, c.roles);
      const std::vector<float> reference = run_rest(model, *reference_seq, c, c.size());
      for (int64_t chunk : {300, 64, 16, 7, 1}) {
        KvPool pool(sliding, kBudget, policy, true);
        auto seq = pool.open(c.ids, c.roles);
        EXPECT_TRUE(same_bits(run_rest(model, *seq, c, chunk), reference)) << "chunks of " << chunk;
        EXPECT_EQ(pool.stats().requantizations, 0);
        EXPECT_LT(pool.stats().used_bytes, reference_pool.stats().used_bytes);
      }
    }
  }
}

TEST(KvSlidingWindow, PrefixReuseIsExactAndBacksOffWhereWindowRowsAreGone) {
  const ModelSpec spec = toy_spec({S, S, F, S}, 20);
  const ToyModel model(windows_of(spec));
  for (const KvPolicy& policy : policies()) {
    SCOPED_TRACE(policy.describe());
    std::mt19937 rng(33);
    KvPool pool(spec, kBudget, policy, true);
    Conversation a;
    add_random_turns(a, rng, 200);
    {
      auto seq = pool.open(a.ids, a.roles);
      run_rest(model, *seq, a, 32);
      seq->publish();
    }
    // A continuation from the last complete block (the next turn, or a branch there) reuses up to
    // it: its window's rows were kept for it.
    Conversation near = a.prefix(199);
    add_random_turns(near, rng, 30);
    {
      auto seq = pool.open(near.ids, near.roles);
      EXPECT_EQ(seq->size(), 192);
      EXPECT_TRUE(same_bits(run_rest(model, *seq, near, 16), fresh(spec, policy, near)));
    }
    // Those rows belong to nobody: the continuation above ran past them and dropped them, so a
    // second one from the same point finds its window's first blocks gone, and since every earlier
    // position needs the rows before it, recomputes from the start.
    Conversation next = a;
    add_random_turns(next, rng, 40);
    {
      auto seq = pool.open(next.ids, next.roles);
      EXPECT_EQ(seq->size(), 0);
      EXPECT_TRUE(same_bits(run_rest(model, *seq, next, 16), fresh(spec, policy, next)));
      seq->publish();
    }
    // Its own blocks are cached now, with the last window: its next turn reuses them.
    Conversation after = next;
    add_random_turns(after, rng, 20);
    {
      auto seq = pool.open(after.ids, after.roles);
      EXPECT_EQ(seq->size(), 240);
      EXPECT_TRUE(same_bits(run_rest(model, *seq, after, 16), fresh(spec, policy, after)));
    }
    // A branch at 50: the cached blocks there lost their sliding rows, and every earlier position
    // needs the rows before it, so nothing can be reused.
    Conversation far = a.prefix(50);
    add_random_turns(far, rng, 30);
    {
      auto seq = pool.open(far.ids, far.roles);
      EXPECT_EQ(seq->size(), 0);
      EXPECT_TRUE(same_bits(run_rest(model, *seq, far, 16), fresh(spec, policy, far)));
    }
    EXPECT_EQ(pool.stats().requantizations, 0);
    EXPECT_GE(pool.stats().prefix_hits, 2);
  }
}

// A served turn marks its prompt's end (keep_window_for_branch) before generating. The next turn
// re-renders the prompt and diverges in the answer: it reuses the whole prompt, exactly, though the
// answer's generation moved every window past it. Without the mark nothing is reused. A later mark
// of the same conversation lets the earlier kept rows go.
TEST(KvSlidingWindow, ANextTurnBranchingAtThePromptEndReusesThePrompt) {
  const ModelSpec spec = toy_spec({S, S, F, S}, 20);
  const ToyModel model(windows_of(spec));
  for (const KvPolicy& policy : policies()) {
    for (bool mark : {true, false}) {
      SCOPED_TRACE(policy.describe() + (mark ? " marked" : " unmarked"));
      std::mt19937 rng(35);
      KvPool pool(spec, kBudget, policy, true);
      Conversation turn;
      add_random_turns(turn, rng, 200);
      int64_t before_answer = 0;
      {
        auto seq = pool.open(turn.ids, turn.roles);
        run_rest(model, *seq, turn, 64);
        if (mark) seq->keep_window_for_branch();
        before_answer = pool.stats().used_bytes;
        Conversation answered = turn;
        add_random_turns(answered, rng, 80);  // the answer, one token at a time
        run_rest(model, *seq, answered, 1);
        seq->publish();
      }
      Conversation next = turn;  // the same prompt, then another answer and a new question
      add_random_turns(next, rng, 60);
      auto seq = pool.open(next.ids, next.roles);
      EXPECT_EQ(seq->size(), mark ? 192 : 0);
      EXPECT_TRUE(same_bits(run_rest(model, *seq, next, 16), fresh(spec, policy, next)));
      if (!mark) continue;
      // Marking this turn's end lets the first mark's rows go (nothing else reads them).
      const int64_t held = pool.stats().used_bytes;
      seq->keep_window_for_branch();
      EXPECT_LT(pool.stats().used_bytes, held);
      EXPECT_GT(before_answer, 0);
    }
  }
}

TEST(KvSlidingWindow, TrimAndReextendEqualsFresh) {
  const ModelSpec spec = toy_spec({S, F, S}, 20);
  const ToyModel model(windows_of(spec));
  for (const KvPolicy& policy : policies()) {
    SCOPED_TRACE(policy.describe());
    std::mt19937 rng(34);
    KvPool pool(spec, kBudget, policy, true);
    Conversation c;
    add_random_turns(c, rng, 200);
    auto seq = pool.open(c.ids, c.roles);
    run_rest(model, *seq, c, 32);
    // One token back: the rows the re-run query reads are all still there.
    EXPECT_EQ(seq->trim(199), 199);
    for (int64_t cut : {190, 150, 60}) {
      const int64_t kept = seq->trim(cut);
      EXPECT_LE(kept, cut);
      c = c.prefix(cut);
      add_random_turns(c, rng, 37);
      EXPECT_TRUE(same_bits(run_rest(model, *seq, c, 13), fresh(spec, policy, c))) << "cut at " << cut << ", kept " << kept;
    }
    EXPECT_EQ(pool.stats().requantizations, 0);
  }
  // Under `full` only the sliding windows limit a cut: 15 tokens back is fine, 50 is beyond them.
  KvPool pool(spec, kBudget, KvPolicy::parse("full"), true);
  std::mt19937 rng(35);
  Conversation c;
  add_random_turns(c, rng, 200);
  auto seq = pool.open(c.ids, c.roles);
  run_rest(model, *seq, c, 200);
  EXPECT_THROW(seq->set_size(150), Error);  // refused without change
  EXPECT_EQ(seq->size(), 200);
  seq->set_size(185);
  EXPECT_EQ(seq->size(), 185);
  EXPECT_EQ(seq->trim(150), 0);
}

// Another sequence still inside a block's window keeps its rows while a longer one moves on.
TEST(KvSlidingWindow, RowsStayWhileAnySequenceStillReadsThem) {
  const ModelSpec spec = toy_spec({S, F}, 20);
  const ToyModel model(windows_of(spec));
  const KvPolicy policy = KvPolicy::parse("protect").with_recent(32);
  std::mt19937 rng(36);
  KvPool pool(spec, kBudget, policy, true);
  Conversation a;
  add_random_turns(a, rng, 100);
  auto first = pool.open(a.ids, a.roles);
  run_rest(model, *first, a, 100);
  first->publish();  // and stays open
  Conversation b = a;
  add_random_turns(b, rng, 200);
  auto second = pool.open(b.ids, b.roles);
  EXPECT_EQ(second->size(), 96);
  EXPECT_TRUE(same_bits(run_rest(model, *second, b, 50), fresh(spec, policy, b)));
  // The first sequence's window rows survived the second one moving past them.
  Conversation a_more = a;
  add_random_turns(a_more, rng, 20);
  EXPECT_TRUE(same_bits(run_rest(model, *first, a_more, 20), fresh(spec, policy, a_more)));
}

TEST(KvSlidingWindow, AttentionMustStayInsideTheKeptWindow) {
  const ModelSpec spec = toy_spec({S, F}, 20);
  KvPool pool(spec, kBudget, KvPolicy::parse("full"), true);
  std::mt19937 rng(37);
  Conversation c;
  add_random_turns(c, rng, 40);
  auto seq = pool.open(c.ids, c.roles);
  run_rest(ToyModel(windows_of(spec)), *seq, c, 40);
  std::vector<float> q(kHeadDim, 0.5f), out(kHeadDim);
  EXPECT_THROW(seq->attend_one(0, 0, q.data(), 39, {.scale = 0.2f}, out.data()), InternalError);
  EXPECT_THROW(seq->attend_one(0, 0, q.data(), 39, {.scale = 0.2f, .window = 21}, out.data()), InternalError);
  seq->attend_one(0, 1, q.data(), 39, {.scale = 0.2f, .window = 7}, out.data());  // narrower: fine
  seq->attend_one(1, 1, q.data(), 39, {.scale = 0.2f}, out.data());
  EXPECT_THROW(seq->attend_one(1, 2, q.data(), 39, {.scale = 0.2f}, out.data()), InternalError);
}

std::string pool_error(const ModelSpec& spec) {
  try {
    KvPool pool(spec, kBudget, KvPolicy::parse("full"), true);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Gemma 4: the global layers have their own head size and KV-head count. Each group stores rows
// of its own shape; a query reads back exactly the (bf16) rows its layer stored, and the pool holds
// what the footprint arithmetic counts.
TEST(KvSlidingWindow, GroupsOfOtherHeadShapesStoreTheirOwnRows) {
  ModelSpec spec = toy_spec({S, S, F, S, S, F}, 20);
  for (size_t i : {2u, 5u}) {
    spec.layers[i].head_dim = 64;
    spec.layers[i].num_kv_heads = 1;
  }
  const KvBlockLayout layout(spec);
  ASSERT_EQ(layout.group_count(), 2);
  EXPECT_EQ(layout.group(1).head_dim, 64);
  EXPECT_EQ(layout.group(1).kv_heads, 1);
  EXPECT_EQ(layout.group_bytes(0, KvFormat::BF16), size_t{4 * 2 * 2 * 16 * 32 * 2});  // 4 layers, 2 heads, K+V
  EXPECT_EQ(layout.group_bytes(1, KvFormat::BF16), size_t{2 * 1 * 2 * 16 * 64 * 2});
  EXPECT_EQ(layout.block_bytes(KvFormat::BF16), layout.group_bytes(0, KvFormat::BF16) + layout.group_bytes(1, KvFormat::BF16));
  EXPECT_EQ(layout.values_offset(KvFormat::BF16, 5, 0) + 16 * 64 * 2, layout.group_bytes(1, KvFormat::BF16));

  // Distinct per layer, position and dimension, so a row read from the wrong place shows.
  auto value = [](int64_t layer, int64_t p, int64_t i) {
    return static_cast<float>(10 * layer + 1) + 0.25f * static_cast<float>(p) + 0.01f * static_cast<float>(i);
  };
  for (const KvPolicy& policy : {KvPolicy::parse("full"), KvPolicy::parse("int8"), KvPolicy::parse("protect")}) {
    SCOPED_TRACE(policy.describe());
    KvPool pool(spec, kBudget, policy, true);
    auto seq = pool.open({}, {});
    const int64_t n = 40;
    std::vector<int32_t> ids(static_cast<size_t>(n), 7);
    std::vector<Role> roles(static_cast<size_t>(n), Role::system);  // bf16 under every policy here
    seq->append_tokens(ids, roles);
    pool.make_room(seq->prepare_pass());
    std::vector<float> k(64), v(64), q(64, 0.0f), out(64);
    for (int64_t layer = 0; layer < 6; ++layer) {
      const LayerSpec& l = spec.layers[static_cast<size_t>(layer)];
      for (int64_t p = 0; p < n; ++p) {
        for (int64_t i = 0; i < l.num_kv_heads * l.head_dim; ++i) {
          k[static_cast<size_t>(i)] = 0.25f * static_cast<float>(layer + 1);
          v[static_cast<size_t>(i)] = value(layer, p, i % l.head_dim);
        }
        seq->store(layer, p, k.data(), v.data());
      }
    }
    seq->set_size(n);
    for (int64_t layer = 0; layer < 6; ++layer) {
      const LayerSpec& l = spec.layers[static_cast<size_t>(layer)];
      // q = 0: every visible key scores alike, so the output is the mean of the visible values.
      const ops::AttentionParams params{.scale = 1.0f, .window = l.attention == AttentionKind::Sliding ? l.window : 0};
      const int64_t first = ops::first_attended_position(n - 1, params.window);
      for (int64_t h = 0; h < l.num_kv_heads; ++h) {
        seq->attend_one(layer, h, q.data(), n - 1, params, out.data());
        for (int64_t i = 0; i < l.head_dim; ++i) {
          double expected = 0;  // the mean of the visible values as stored (bf16)
          for (int64_t p = first; p < n; ++p) expected += bf16_to_float(float_to_bf16(value(layer, p, i)));
          expected /= static_cast<double>(n - first);
          // Exact up to summation order when the rows stay bf16; int8 rows are within their step.
          const double tolerance = (policy == KvPolicy::parse("int8") ? 1e-2 : 1e-5) * std::abs(expected);
          EXPECT_NEAR(out[static_cast<size_t>(i)], expected, tolerance)
              << "layer " << layer << " head " << h << " dim " << i;
        }
      }
    }
    EXPECT_EQ(pool.stats().used_bytes, kv_sequence_bytes(spec, policy, roles));
  }
}

TEST(KvSlidingWindow, ThePoolRefusesLayersItCannotStoreAndNamesThem) {
  ModelSpec mla = toy_spec({F, AttentionKind::Mla, F, AttentionKind::Mla, AttentionKind::Mla}, 0);
  std::string e = pool_error(mla);
  EXPECT_TRUE(contains(e, "layers 1, 3-4")) << e;
  EXPECT_TRUE(contains(e, "latent")) << e;
  e = pool_error(toy_spec({AttentionKind::Linear, F}, 0));
  EXPECT_TRUE(contains(e, "layer 0 ")) << e;
  EXPECT_TRUE(contains(e, "linear")) << e;
  e = pool_error(toy_spec({F, AttentionKind::SharedKv}, 0));
  EXPECT_TRUE(contains(e, "layer 1 ")) << e;
  ModelSpec no_window = toy_spec({S, F}, 20);
  no_window.layers[0].window = 0;
  EXPECT_TRUE(contains(pool_error(no_window), "layer 0")) << pool_error(no_window);
  ModelSpec unlisted = toy_spec({F, F}, 0);
  unlisted.layers.pop_back();
  EXPECT_FALSE(pool_error(unlisted).empty());
}

}  // namespace
}  // namespace keel::kv
