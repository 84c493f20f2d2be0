// The KV pool's disk tier (keel/kv/kv_disk_tier.h): a prefix cache that survives a restart with
// the same exactness as the RAM cache (reuse from disk == fresh prefill, bit for bit, under every
// policy, with sliding-window layers), refuses and recomputes any file that is truncated, flipped
// or of another model, never lets another model (or policy) hit, and stays under its size cap,
// least recently used first, across restarts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/kv/kv_block_hash.h"
#include "keel/kv/kv_disk_identity.h"
#include "keel/kv/kv_disk_tier.h"
#include "keel/kv/kv_pool.h"
#include "keel/model/weights.h"
#include "kv_reuse_support.h"
#include "test_support.h"

namespace keel::kv {
namespace {

using chat::Role;
namespace fs = std::filesystem;
using reuse::add_random_turns, reuse::Conversation, reuse::fresh_logits, reuse::kBudget, reuse::policies, reuse::run_rest,
    reuse::same_bits;

uint64_t model_identity(const fs::path& model) { return kv_model_identity(find_model_files(model)); }

struct Model {
  explicit Model(const char* name)
      : dir(test::shared_dir() / "models" / name), weights(arch::load_model(dir)), model(weights, pool) {}
  fs::path dir;
  ModelWeights weights;
  ThreadPool pool{2};
  Transformer model;
};

KvDiskOptions disk_at(const fs::path& dir, uint64_t identity, int64_t cap = int64_t{1} << 30) {
  KvDiskOptions o;
  o.dir = dir;
  o.max_bytes = cap;
  o.model_identity = identity;
  return o;
}

// Block files under `dir`, every namespace.
std::vector<fs::path> block_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".kvb") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

int64_t folder_bytes(const fs::path& dir) {
  int64_t n = 0;
  for (const fs::path& p : block_files(dir)) n += static_cast<int64_t>(fs::file_size(p));
  return n;
}

// The file the pool names block `b` of `c` by (salt 0), from the chain functions alone.
fs::path file_of_block(const fs::path& namespace_folder, const KvPolicy& policy, bool rotate, const Conversation& c,
                       int64_t b) {
  uint64_t hash = kv_salted_root(kv_chain_root(policy.describe(), rotate), 0), check = kv_check_root(hash);
  for (int64_t i = 0; i <= b; ++i) {
    const auto at = static_cast<size_t>(i * kKvBlockTokens);
    const auto ids = std::span<const int32_t>(c.ids).subspan(at, kKvBlockTokens);
    const KvFormat format = policy.block_format(std::span<const Role>(c.roles).subspan(at, kKvBlockTokens), i * kKvBlockTokens);
    hash = kv_chain_hash(hash, ids, format);
    check = kv_chain_check(check, ids, format);
  }
  return namespace_folder / kv_disk_file_name(hash, check);
}

fs::path only_namespace(const fs::path& dir) {
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) folders.push_back(e.path());
  EXPECT_EQ(folders.size(), 1u);
  return folders.empty() ? dir : folders.front();
}

const char* const kModels[] = {"tiny-toolcaller", "tiny-gemma3-random", "tiny-gptoss-random"};

// A restart (a new pool on the same folder, nothing in RAM) reuses every whole block of the
// previous process's conversation from disk, and the logits equal a fresh prefill's bit for bit,
// for the next turn and for branches at random points; nothing is ever quantized twice.
TEST(KvDiskTier, RestartReusesBlocksBitIdenticalToFreshPrefill) {
  for (const char* name : kModels) {
    Model m(name);
    const uint64_t identity = model_identity(m.dir);
    std::mt19937 rng(11);
    for (const KvPolicy& policy : policies()) {
      SCOPED_TRACE(std::string(name) + " / " + policy.describe());
      test::TempDir dir;
      Conversation a;
      add_random_turns(a, rng, 150, m.weights.spec.vocab_size);
      {
        KvPool pool(m.weights.spec, kBudget, policy, true, 0, disk_at(dir.path(), identity));
        auto seq = pool.open(a.ids, a.roles);
        run_rest(m.model, *seq, a, 32);
        seq->publish();
      }  // the pool's destructor waits for the writer
      EXPECT_EQ(block_files(dir.path()).size(), 9u);

      KvPool pool(m.weights.spec, kBudget, policy, true, 0, disk_at(dir.path(), identity));
      Conversation next = a;
      add_random_turns(next, rng, 40, m.weights.spec.vocab_size);
      {
        auto seq = pool.open(next.ids, next.roles);
        EXPECT_EQ(seq->size(), 144);
        EXPECT_TRUE(same_bits(run_rest(m.model, *seq, next, 7), fresh_logits(m.model, policy, next)));
        seq->publish();
      }
      for (int i = 0; i < 3; ++i) {
        const int64_t cut = std::uniform_int_distribution<int64_t>(1, next.size() - 1)(rng);
        Conversation branch = next.prefix(cut);
        add_random_turns(branch, rng, 30, m.weights.spec.vocab_size);
        auto seq = pool.open(branch.ids, branch.roles);
        EXPECT_LE(seq->size(), cut);
        EXPECT_TRUE(same_bits(run_rest(m.model, *seq, branch, 32), fresh_logits(m.model, policy, branch)))
            << "cut at " << cut << ", reused " << seq->size();
      }
      const KvPoolStats s = pool.stats();
      EXPECT_EQ(s.disk_reused_blocks, 9);
      EXPECT_GE(s.disk.hits, 9);
      EXPECT_EQ(s.disk.corrupt, 0);
      EXPECT_EQ(s.disk.mismatched, 0);
      EXPECT_EQ(s.requantizations, 0);
      EXPECT_LE(s.used_bytes, s.budget_bytes);
    }
  }
}

// Blocks evicted from a RAM budget too small for two conversations come back from disk, counted
// against the budget, and still give fresh prefill's bits. With a write queue of one block most
// blocks are not written when published; eviction and the pool's destructor write them instead.
TEST(KvDiskTier, EvictedBlocksComeBackFromDiskWithinTheBudget) {
  Model m("tiny-toolcaller");
  const uint64_t identity = model_identity(m.dir);
  for (const KvPolicy& policy : {KvPolicy::parse("full"), KvPolicy::parse("protect").with_recent(32)}) {
    SCOPED_TRACE(policy.describe());
    test::TempDir dir;
    KvDiskOptions disk = disk_at(dir.path(), identity);
    disk.queue_bytes = 1;
    std::mt19937 rng(3);
    Conversation a, b;
    add_random_turns(a, rng, 300, m.weights.spec.vocab_size);
    add_random_turns(b, rng, 300, m.weights.spec.vocab_size);
    const auto budget = static_cast<int64_t>(KvBlockLayout(m.weights.spec).block_bytes(KvFormat::BF16)) * 24;
    KvPool pool(m.weights.spec, budget, policy, true, 0, disk);
    for (const Conversation* c : {&a, &b}) {
      auto seq = pool.open(c->ids, c->roles);
      run_rest(m.model, *seq, *c, 64);
      seq->publish();
    }
    EXPECT_GT(pool.stats().evictions, 0);
    Conversation again = a;
    add_random_turns(again, rng, 20, m.weights.spec.vocab_size);
    auto seq = pool.open(again.ids, again.roles);
    EXPECT_EQ(seq->size(), 288);
    EXPECT_GT(pool.stats().disk_reused_blocks, 0);
    EXPECT_TRUE(same_bits(run_rest(m.model, *seq, again, 64), fresh_logits(m.model, policy, again)));
    const KvPoolStats s = pool.stats();
    EXPECT_LE(s.used_bytes, s.budget_bytes);
    EXPECT_EQ(s.disk.corrupt + s.disk.mismatched, 0);
  }
}

// open() reads disk blocks in batches (64 blocks between two looks at the budget): a prompt of
// more than one batch comes back whole, and exactly.
TEST(KvDiskTier, ARestartReadsMoreThanOneBatch) {
  Model m("tiny-toolcaller");
  const uint64_t identity = model_identity(m.dir);
  const KvPolicy policy = KvPolicy::parse("protect").with_recent(32);
  test::TempDir dir;
  std::mt19937 rng(13);
  Conversation a;
  add_random_turns(a, rng, 2100, m.weights.spec.vocab_size);  // 131 whole blocks: three batches
  {
    KvPool pool(m.weights.spec, kBudget, policy, true, 0, disk_at(dir.path(), identity));
    auto seq = pool.open(a.ids, a.roles);
    run_rest(m.model, *seq, a, 256);
    seq->publish();
  }
  KvPool pool(m.weights.spec, kBudget, policy, true, 0, disk_at(dir.path(), identity));
  Conversation next = a;
  add_random_turns(next, rng, 30, m.weights.spec.vocab_size);
  auto seq = pool.open(next.ids, next.roles);
  EXPECT_EQ(seq->size(), 131 * kKvBlockTokens);
  EXPECT_EQ(pool.stats().disk_reused_blocks, 131);
  EXPECT_TRUE(same_bits(run_rest(m.model, *seq, next, 64), fresh_logits(m.model, policy, next)));
  EXPECT_EQ(pool.stats().requantizations, 0);
}

enum class Damage { FlipPayload, FlipHeader, Truncate, Empty, OtherModel };

// A damaged file stops the walk at its block: the blocks before it are reused, it and the rest
// are recomputed (same bits as fresh), the file is counted and removed, and the recomputed block
// is written again.
TEST(KvDiskTier, DamagedFilesAreDetectedCountedAndRecomputed) {
  Model m("tiny-toolcaller");
  const uint64_t identity = model_identity(m.dir);
  const KvPolicy policy = KvPolicy::parse("full");
  std::mt19937 rng(7);
  Conversation a;
  add_random_turns(a, rng, 150, m.weights.spec.vocab_size);
  for (Damage damage : {Damage::FlipPayload, Damage::FlipHeader, Damage::Truncate, Damage::Empty, Damage::OtherModel}) {
    SCOPED_TRACE(static_cast<int>(damage));
    test::TempDir dir;
    {
      KvPool pool(m.weights.spec, kBudget, policy, true, 0, disk_at(dir.path(), identity));
      auto seq = pool.open(a.ids, a.roles);
      run_rest(m.model, *seq, a, 150);
      seq->publish();
    }
    const fs::path ns = only_namespace(dir.path());
    const fs::path victim = file_of_block(ns, policy, true, a, 4);
    ASSERT_TRUE(fs::exists(victim));
    std::string bytes = test::read_text(victim);
    switch (damage) {
      case Damage::FlipPayload: bytes[bytes.size() / 2] ^= 0x10; break;
      case Damage::FlipHeader: bytes[100] ^= 0x01; break;  // inside the tokens
      case Damage::Truncate: bytes.resize(bytes.size() - 1000); break;
      case Damage::Empty: bytes.clear(); break;
      case Damage::OtherModel: {
        // Another model's file under this block's name: intact, but of another namespace.
        test::TempDir other;
        {
          KvPool pool(m.weights.spec, kBudget, policy, true, 0, disk_at(other.path(), identity + 1));
          auto seq = pool.open(a.ids, a.roles);
          run_rest(m.model, *seq, a, 150);
          seq->publish();
        }
        bytes = test::read_text(file_of_block(only_namespace(other.path()), policy, true, a, 4));
        break;
      }
    }
    { std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes; }

    auto pool = std::make_unique<KvPool>(m.weights.spec, kBudget, policy, true, 0, disk_at(dir.path(), identity));
    Conversation next = a;
    add_random_turns(next, rng, 20, m.weights.spec.vocab_size);
    auto seq = pool->open(next.ids, next.roles);
    EXPECT_EQ(seq->size(), 4 * kKvBlockTokens);
    const KvPoolStats s = pool->stats();
    EXPECT_EQ(s.disk.corrupt, damage == Damage::OtherModel ? 0 : 1);
    EXPECT_EQ(s.disk.mismatched, damage == Damage::OtherModel ? 1 : 0);
    EXPECT_FALSE(fs::exists(victim));
    EXPECT_TRUE(same_bits(run_rest(m.model, *seq, next, 32), fresh_logits(m.model, policy, next)));
    seq->publish();
    seq.reset();
    // The recomputed block is offered again: a third process reuses everything.
    pool.reset();
    pool = std::make_unique<KvPool>(m.weights.spec, kBudget, policy, true, 0, disk_at(dir.path(), identity));
    auto third = pool->open(next.ids, next.roles);
    EXPECT_EQ(third->size(), 160);
    EXPECT_TRUE(same_bits(run_rest(m.model, *third, next, 32), fresh_logits(m.model, policy, next)));
  }
}

// Another model (another identity: a different folder, or the same shapes with other weights) or
// another policy never reads this one's blocks: they live in another namespace folder.
TEST(KvDiskTier, AnotherModelOrPolicyNeverHits) {
  Model m("tiny-toolcaller");
  test::TempDir copies;
  // The same folder copied elsewhere is the same model; one weight byte changed is another.
  const fs::path same = copies.path() / "same", changed = copies.path() / "changed";
  fs::copy(m.dir, same, fs::copy_options::recursive);
  fs::copy(m.dir, changed, fs::copy_options::recursive);
  fs::path weights;
  for (const auto& e : fs::directory_iterator(changed))
    if (e.path().extension() == ".safetensors") weights = e.path();
  {
    std::fstream f(weights, std::ios::binary | std::ios::in | std::ios::out);
    uint64_t header = 0;
    f.read(reinterpret_cast<char*>(&header), 8);
    f.seekg(static_cast<std::streamoff>(8 + header));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(static_cast<std::streamoff>(8 + header));
    f.write(&c, 1);
  }
  const uint64_t identity = model_identity(m.dir);
  EXPECT_EQ(model_identity(same), identity);
  EXPECT_NE(model_identity(changed), identity);
  EXPECT_NE(model_identity(test::shared_dir() / "models" / "tiny-qwen3-random"), identity);

  const KvPolicy full = KvPolicy::parse("full");
  test::TempDir dir;
  std::mt19937 rng(9);
  Conversation a;
  add_random_turns(a, rng, 100, m.weights.spec.vocab_size);
  {
    KvPool pool(m.weights.spec, kBudget, full, true, 0, disk_at(dir.path(), identity));
    auto seq = pool.open(a.ids, a.roles);
    run_rest(m.model, *seq, a, 100);
    seq->publish();
  }
  struct Other {
    uint64_t identity;
    KvPolicy policy;
    bool rotate;
  };
  for (const Other& o : {Other{model_identity(changed), full, true}, Other{identity, KvPolicy::parse("int8"), true},
                         Other{identity, full, false}}) {
    KvPool pool(m.weights.spec, kBudget, o.policy, o.rotate, 0, disk_at(dir.path(), o.identity));
    auto seq = pool.open(a.ids, a.roles);
    EXPECT_EQ(seq->size(), 0);
    const KvPoolStats s = pool.stats();
    EXPECT_EQ(s.disk.hits, 0);
    EXPECT_EQ(s.disk.mismatched + s.disk.corrupt, 0);  // it never even opened the other's files
    EXPECT_EQ(s.disk.files, 6);                         // but counts them against the folder's cap
  }
  KvPool pool(m.weights.spec, kBudget, full, true, 0, disk_at(dir.path(), model_identity(same)));
  EXPECT_EQ(pool.open(a.ids, a.roles)->size(), 96);
}

KvDiskBlock synthetic_block(const KvBlockLayout& layout, uint64_t n) {
  KvDiskBlock b;
  b.id.hash = n * 0x9e3779b97f4a7c15ull + 1;
  b.id.check = n + 7;
  b.id.tokens.fill(static_cast<int32_t>(n));
  b.groups.resize(static_cast<size_t>(layout.group_count()));
  for (int64_t g = 0; g < layout.group_count(); ++g)
    b.groups[static_cast<size_t>(g)].full.assign(layout.group_bytes(g, KvFormat::BF16), static_cast<uint8_t>(n));
  return b;
}

// The folder stays under its cap: least recently used files go first, a read counts as a use, and
// a restart keeps the order (files' mtimes), also when it starts with a smaller cap.
TEST(KvDiskTier, LruEvictionKeepsTheFolderUnderItsCap) {
  Model m("tiny-toolcaller");
  const KvBlockLayout layout(m.weights.spec);
  test::TempDir dir;
  const int64_t file = static_cast<int64_t>(kv_disk_encode(synthetic_block(layout, 0), 1).size());
  const int64_t cap = 5 * file;
  {
    KvDiskTier tier(disk_at(dir.path(), 0, cap), 1, layout);
    for (uint64_t n = 0; n < 5; ++n) tier.store(synthetic_block(layout, n), KvDiskTier::Queue::Always);
    tier.flush();
    EXPECT_EQ(tier.stats().files, 5);
    ASSERT_TRUE(tier.load(synthetic_block(layout, 0).id));  // block 0 is now the most recent
    for (uint64_t n = 5; n < 8; ++n) tier.store(synthetic_block(layout, n), KvDiskTier::Queue::Always);
    tier.flush();
    const KvDiskStats s = tier.stats();
    EXPECT_EQ(s.files, 5);
    EXPECT_EQ(s.evictions, 3);
    EXPECT_LE(folder_bytes(dir.path()), cap);
    EXPECT_EQ(s.bytes, folder_bytes(dir.path()));
    for (uint64_t gone : {1, 2, 3}) EXPECT_FALSE(tier.load(synthetic_block(layout, gone).id)) << gone;
    for (uint64_t kept : {0, 4, 5, 6, 7}) EXPECT_TRUE(tier.contains(synthetic_block(layout, kept).id.hash,
                                                                    synthetic_block(layout, kept).id.check)) << kept;
  }
  // Restart with room for three: by the files' mtimes the use order was 4 (written), 0 (read),
  // then 5, 6, 7 (written), so 4 and 0 go.
  KvDiskTier tier(disk_at(dir.path(), 0, 3 * file), 1, layout);
  const KvDiskStats s = tier.stats();
  EXPECT_EQ(s.files, 3);
  EXPECT_EQ(s.evictions, 2);
  EXPECT_LE(folder_bytes(dir.path()), 3 * file);
  for (uint64_t kept : {5, 6, 7}) EXPECT_TRUE(tier.load(synthetic_block(layout, kept).id)) << kept;
  for (uint64_t gone : {0, 4}) EXPECT_FALSE(tier.load(synthetic_block(layout, gone).id)) << gone;
}

// What a crash leaves behind: a temp file is removed at start; a block file cut short is refused.
TEST(KvDiskTier, LeftoverTempFilesAreRemovedAtStart) {
  Model m("tiny-toolcaller");
  const KvBlockLayout layout(m.weights.spec);
  test::TempDir dir;
  const fs::path ns = dir.path() / kv_disk_namespace_name(1);
  fs::create_directories(ns);
  { std::ofstream(ns / ".0123.kvb.tmp") << "half a block"; }
  KvDiskTier tier(disk_at(dir.path(), 0), 1, layout);
  EXPECT_FALSE(fs::exists(ns / ".0123.kvb.tmp"));
  EXPECT_EQ(tier.stats().files, 0);
}

}  // namespace
}  // namespace keel::kv
