#include "keel/kv/kv_pool.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "keel/kv/kv_block_hash.h"
#include "keel/kv/kv_disk_identity.h"
#include "keel/kv/kv_format.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel::kv {
namespace {

// Blocks open() reads from disk between two looks at the budget.
constexpr size_t kDiskReadBatch = 64;

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

KvPool::KvPool(const ModelSpec& spec, int64_t budget_bytes, KvPolicy policy, bool rotate, int64_t max_context,
               const KvDiskOptions& disk, int64_t state_interval)
    : spec_(spec),
      layout_(spec, policy),
      budget_(budget_bytes),
      policy_(std::move(policy)),
      rotate_(rotate),
      max_context_(max_context > 0 ? max_context : (spec.max_position > 0 ? spec.max_position : int64_t{1} << 20)),
      chain_root_(kv_chain_root(policy_.describe(), rotate)),
      state_interval_(state_interval) {
  if (state_interval < 1) throw Error("--kv-state-interval must be at least 1 block");
  for (const KvLayerGroup& g : layout_.groups())
    if (policy_.quantizes() && g.head_dim % kKvQuantGroup != 0)
      throw Error("KV policy '" + policy_.describe() + "' quantizes rows of head_dim " + std::to_string(g.head_dim) +
                ", which is not a multiple of " + std::to_string(kKvQuantGroup) + "; use --kv-policy full");
  const size_t block = layout_.block_bytes(KvFormat::BF16) + static_cast<size_t>(layout_.linear().snapshot_bytes());
  if (budget_bytes < static_cast<int64_t>(block))
    throw Error("KV memory budget of " + std::to_string(budget_bytes) + " bytes cannot hold one block of " +
                std::to_string(kKvBlockTokens) + " tokens and one recurrent-state snapshot (" + std::to_string(block) + " bytes)");
  if (disk.enabled())
    disk_ = std::make_unique<KvDiskTier>(disk, kv_disk_namespace(disk.model_identity, layout_, chain_root_), layout_);
}

KvPool::~KvPool() {
  if (!disk_) return;
  MutexLock lock(mu_);
  for (auto& [key, block] : blocks_)
    if (block->cached) offer_to_disk_locked(*block, true);
  // disk_ goes first of the members: its destructor writes what is still queued.
}

bool KvPool::rotated(KvFormat format) const { return rotate_ && rotated_by_default(format); }

std::vector<KvDiskBlockId> KvPool::block_chain(std::span<const int32_t> tokens, std::span<const chat::Role> roles,
                                                uint64_t cache_salt) const {
  if (roles.size() != tokens.size())
    throw Error("KV pool: " + std::to_string(tokens.size()) + " tokens but " + std::to_string(roles.size()) + " roles");
  // Whole blocks only, and never the last token: the caller needs its logits. Each block's place
  // in both chains (hash, check) and its format, from the tokens alone.
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t max_blocks = n > 0 ? (n - 1) / kKvBlockTokens : 0;
  std::vector<KvDiskBlockId> chain(static_cast<size_t>(max_blocks));
  uint64_t hash = kv_salted_root(chain_root_, cache_salt), check = kv_check_root(hash);
  for (int64_t b = 0; b < max_blocks; ++b) {
    const auto at = static_cast<size_t>(b * kKvBlockTokens);
    KvDiskBlockId& id = chain[static_cast<size_t>(b)];
    id.parent_hash = hash;
    id.parent_check = check;
    id.cache_salt = cache_salt;
    id.format = policy_.block_format(roles.subspan(at, kKvBlockTokens), b * kKvBlockTokens);
    std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(at), kKvBlockTokens, id.tokens.begin());
    hash = id.hash = kv_chain_hash(hash, id.tokens, id.format);
    check = id.check = kv_chain_check(check, id.tokens, id.format);
  }
  return chain;
}

KvPool::CachedBlocks KvPool::cached_blocks() const {
  MutexLock lock(mu_);
  CachedBlocks out;
  out.seq = events_.last_seq();
  out.hashes.reserve(cached_.size());
  for (const auto& [hash, block] : cached_) out.hashes.push_back(hash);
  return out;
}

std::optional<std::vector<KvBlockEvent>> KvPool::events_since(uint64_t after, size_t limit) const {
  MutexLock lock(mu_);
  return events_.since(after, limit);
}

std::vector<uint64_t> KvPool::prefix_hashes(std::span<const int32_t> tokens, std::span<const chat::Role> roles,
                                            uint64_t cache_salt) const {
  std::vector<uint64_t> hashes;
  for (const KvDiskBlockId& id : block_chain(tokens, roles, cache_salt)) hashes.push_back(id.hash);
  return hashes;
}

int64_t KvPool::cached_prefix_bound(std::span<const int32_t> tokens, std::span<const chat::Role> roles,
                                    uint64_t cache_salt) const {
  const std::vector<KvDiskBlockId> chain = block_chain(tokens, roles, cache_salt);
  size_t b = 0;
  {
    MutexLock lock(mu_);
    const KvBlock* parent = nullptr;
    for (; b < chain.size(); ++b) {
      const KvDiskBlockId& id = chain[b];
      const KvBlock* block = find_cached_locked(id.hash, parent, id.tokens, id.format, cache_salt);
      if (block == nullptr) break;
      parent = block;
    }
  }
  while (disk_ && b < chain.size() && disk_->contains(chain[b].hash, chain[b].check)) ++b;
  return static_cast<int64_t>(b) * kKvBlockTokens;
}

std::unique_ptr<KvSequence> KvPool::open(std::span<const int32_t> tokens, std::span<const chat::Role> roles,
                                         uint64_t cache_salt) {
  const std::vector<KvDiskBlockId> chain = block_chain(tokens, roles, cache_salt);
  std::unique_ptr<KvSequence> seq(new KvSequence(*this, cache_salt));

  KvBlock* parent = nullptr;
  auto reuse = [&](KvBlock* block) KEEL_REQUIRES(mu_) {
    hold_locked(*block);
    ++block->full_pins;  // pinned_from_ == 0: the first forward pass settles which rows stay
    for (int64_t g = 0; g < layout_.group_count(); ++g)
      if (layout_.group(g).window > 0) pin_window_locked(*block, g);  // window_from_ == 0, likewise
    touch_locked(*block);
    seq->blocks_.push_back(block);
    parent = block;
  };
  MutexLock lock(mu_);
  if (const int64_t live = layout_.linear().live_bytes()) {  // the sequence's recurrent state counts too
    reserve_locked(static_cast<size_t>(live));
    used_ += live;
    state_bytes_ += live;
    seq->live_state_counted_ = true;
  }
  size_t b = 0;
  for (; b < chain.size(); ++b) {
    const KvDiskBlockId& id = chain[b];
    KvBlock* block = find_cached_locked(id.hash, parent, id.tokens, id.format, cache_salt);
    if (block == nullptr) break;
    reuse(block);
  }
  // Where RAM ends, the chain may go on on disk. Files are read without the pool's lock (the
  // blocks reused so far are held, so nothing evicts them meanwhile), a batch at a time, so what
  // is read beside the budget stays small and reading stops once the budget is full.
  bool on_disk = disk_ != nullptr;
  while (on_disk && b < chain.size()) {
    lock.unlock();
    std::vector<KvDiskBlock> loaded;
    for (size_t d = b; d < chain.size() && loaded.size() < kDiskReadBatch; ++d) {
      std::optional<KvDiskBlock> block = disk_->load(chain[d]);
      if (!block) break;
      loaded.push_back(std::move(*block));
    }
    lock.lock();
    on_disk = loaded.size() == kDiskReadBatch;
    for (KvDiskBlock& data : loaded) {
      const KvDiskBlockId& id = chain[b];
      KvBlock* block = find_cached_locked(id.hash, parent, id.tokens, id.format, cache_salt);  // published meanwhile?
      if (block == nullptr) {
        try {
          block = adopt_disk_block_locked(std::move(data), parent);
        } catch (const CapacityError&) {
          on_disk = false;  // the budget is held by live sequences: prefill the rest as without the disk
          break;
        }
        ++disk_reused_blocks_;
      }
      reuse(block);
      ++b;
    }
  }
  const int64_t matched = static_cast<int64_t>(seq->blocks_.size()) * kKvBlockTokens;
  seq->ids_.assign(tokens.begin(), tokens.begin() + matched);
  seq->roles_.assign(roles.begin(), roles.begin() + matched);
  seq->size_ = matched;
  seq->pool_.mu_.assert_held();  // seq->pool_ is *this
  seq->cut_locked(seq->resume_linear_locked(seq->longest_exact_prefix_locked(matched)));
  (seq->size_ > 0 ? prefix_hits_ : prefix_misses_) += 1;
  reused_tokens_ += seq->size_;
  return seq;
}

KvDiskBlock KvPool::disk_block_locked(KvBlock& block, bool take_rows) {
  KvDiskBlock d;
  KvDiskBlockId& id = d.id;
  id.hash = block.hash;
  id.check = block.check;
  id.parent_hash = block.parent != nullptr ? block.parent->hash : kv_salted_root(chain_root_, block.cache_salt);
  id.parent_check = block.parent != nullptr ? block.parent->check : kv_check_root(id.parent_hash);
  id.cache_salt = block.cache_salt;
  id.format = block.format;
  id.tokens = block.tokens;
  d.full_kept_for_branch = block.full_kept_for_branch;
  d.groups.resize(block.groups.size());
  for (size_t g = 0; g < block.groups.size(); ++g) {
    KvGroupRows& rows = block.groups[g];
    KvDiskGroupRows& out = d.groups[g];
    out.quantized_layers = rows.quantized_layers;
    out.kept_for_branch = rows.kept_for_branch;
    if (take_rows) {
      // The block is going: its rows move to the writer and leave the budget now.
      add_bytes_locked(KvFormat::BF16, -static_cast<int64_t>(rows.full.size()));
      add_quantized_bytes_locked(static_cast<int64_t>(g), block.format, rows.quantized, -1);
      out.full.swap(rows.full);
      out.quantized.swap(rows.quantized);
      rows.quantized_layers = 0;
    } else {
      out.full = rows.full;
      out.quantized = rows.quantized;
    }
  }
  return d;
}

void KvPool::offer_to_disk_locked(KvBlock& block, bool take_rows) {
  if (!disk_ || !block.cached) return;
  if (block.on_disk && disk_->contains(block.hash, block.check)) return;
  if (!take_rows) {
    int64_t bytes = 0;
    for (const KvGroupRows& rows : block.groups) bytes += static_cast<int64_t>(rows.full.size() + rows.quantized.size());
    if (!disk_->room_for_copy(bytes)) return;  // written when it is evicted instead
  }
  block.on_disk = disk_->store(disk_block_locked(block, take_rows),
                               take_rows ? KvDiskTier::Queue::Always : KvDiskTier::Queue::IfRoom);
}

KvBlock* KvPool::adopt_disk_block_locked(KvDiskBlock&& data, KvBlock* parent) {
  reserve_locked(static_cast<size_t>(data.row_bytes()));
  auto owned = std::make_unique<KvBlock>();
  KvBlock* block = owned.get();
  block->format_known = true;
  block->format = data.id.format;
  block->full_kept_for_branch = data.full_kept_for_branch;
  block->on_disk = true;
  block->groups.resize(data.groups.size());
  for (size_t g = 0; g < data.groups.size(); ++g) {
    KvDiskGroupRows& in = data.groups[g];
    KvGroupRows& rows = block->groups[g];
    add_bytes_locked(KvFormat::BF16, static_cast<int64_t>(in.full.size()));
    add_quantized_bytes_locked(static_cast<int64_t>(g), block->format, in.quantized, 1);
    rows.full = std::move(in.full);
    rows.quantized = std::move(in.quantized);
    rows.quantized_layers = in.quantized_layers;
    rows.kept_for_branch = in.kept_for_branch;
  }
  blocks_.emplace(block, std::move(owned));
  insert_cached_locked(*block, data.id.hash, parent, data.id.tokens, data.id.cache_salt);
  return block;
}

KvPoolStats KvPool::stats() const {
  MutexLock lock(mu_);
  KvPoolStats s;
  s.budget_bytes = budget_;
  s.used_bytes = used_;
  s.bytes_by_format = bytes_by_format_;
  s.state_bytes = state_bytes_;
  s.state_snapshots = state_snapshots_;
  s.blocks_live = static_cast<int64_t>(blocks_.size());
  for (const auto& [key, block] : blocks_) {
    if (block->holders > 0) ++s.blocks_in_use;
    if (block->cached) ++s.blocks_cached;
  }
  s.blocks_evictable = static_cast<int64_t>(evictable_.size());
  s.blocks_free = (budget_ - used_) / static_cast<int64_t>(layout_.block_bytes(KvFormat::BF16));
  s.prefix_hits = prefix_hits_;
  s.prefix_misses = prefix_misses_;
  s.reused_tokens = reused_tokens_;
  s.evictions = evictions_;
  s.quantizations = quantizations_;
  s.requantizations = requantizations_;
  s.disk_reused_blocks = disk_reused_blocks_;
  if (disk_) s.disk = disk_->stats();
  return s;
}

void KvPool::add_bytes_locked(KvFormat format, int64_t delta) {
  used_ += delta;
  bytes_by_format_[static_cast<size_t>(format)] += delta;
}

void KvPool::free_rows_locked(std::vector<uint8_t>& rows, KvFormat format) {
  add_bytes_locked(format, -static_cast<int64_t>(rows.size()));
  std::vector<uint8_t>().swap(rows);
}

void KvPool::add_quantized_bytes_locked(int64_t group, KvFormat format, const std::vector<uint8_t>& rows, int sign) {
  if (rows.empty()) return;
  // A layer-aware policy may store the group's K rows and V rows in different formats.
  const KvRowForms forms = layout_.forms(group, format);
  const auto keys = static_cast<int64_t>(layout_.group_key_bytes(group, format));
  add_bytes_locked(forms.k, sign * keys);
  add_bytes_locked(forms.v, sign * (static_cast<int64_t>(rows.size()) - keys));
}

void KvPool::free_quantized_locked(int64_t group, KvFormat format, std::vector<uint8_t>& rows) {
  add_quantized_bytes_locked(group, format, rows, -1);
  std::vector<uint8_t>().swap(rows);
}

void KvPool::reserve_locked(size_t bytes) {
  const auto need = static_cast<int64_t>(bytes);
  while (used_ + need > budget_) {
    if (evictable_.empty())
      throw CapacityError("KV pool exhausted: " + std::to_string(bytes) + " more bytes needed but " + mib(used_) + " of the " +
                  mib(budget_) + " budget hold live sequences (raise --kv-memory, shorten the context, or use a "
                  "smaller --kv-policy)");
    evict_locked(*evictable_.begin()->second);
  }
}

void KvPool::make_room(int64_t bytes) {
  if (bytes <= 0) return;
  MutexLock lock(mu_);
  reserve_locked(static_cast<size_t>(bytes));
}

KvBlock* KvPool::new_block_locked() {
  const size_t bytes = layout_.block_bytes(KvFormat::BF16);
  reserve_locked(bytes);
  auto owned = std::make_unique<KvBlock>();
  KvBlock* block = owned.get();
  block->groups.resize(static_cast<size_t>(layout_.group_count()));
  for (int64_t g = 0; g < layout_.group_count(); ++g) {
    KvGroupRows& rows = block->groups[static_cast<size_t>(g)];
    rows.full.assign(layout_.group_bytes(g, KvFormat::BF16), 0);
    rows.window_pins = layout_.group(g).window > 0 ? 1 : 0;
  }
  add_bytes_locked(KvFormat::BF16, static_cast<int64_t>(bytes));
  block->holders = 1;
  block->full_pins = 1;
  touch_locked(*block);
  blocks_.emplace(block, std::move(owned));
  return block;
}

KvBlock* KvPool::copy_block_locked(const KvBlock& src) {
  for (const KvGroupRows& rows : src.groups)
    if (rows.full.empty()) throw InternalError("KV block copied without its full-precision rows");
  KvBlock* block = new_block_locked();
  for (size_t g = 0; g < src.groups.size(); ++g)
    std::copy(src.groups[g].full.begin(), src.groups[g].full.end(), block->groups[g].full.begin());
  return block;
}

void KvPool::quantize_layer_locked(KvBlock& block, int64_t layer) {
  const int64_t g = layout_.group_of(layer), index = layout_.index_in_group(layer);
  KvGroupRows& rows = block.groups[static_cast<size_t>(g)];
  if (rows.quantized_layers > index) {
    ++requantizations_;  // a caller asked again: refuse, the rows are final
    return;
  }
  if (rows.quantized_layers < index || !block.format_known || !layout_.quantizes(g, block.format) || rows.full.empty())
    throw InternalError("KV block quantized out of order (layer " + std::to_string(layer) + ")");
  const KvFormat format = block.format;
  if (rows.quantized.empty()) {
    const size_t bytes = layout_.group_bytes(g, format);
    reserve_locked(bytes);
    rows.quantized.assign(bytes, 0);
    add_quantized_bytes_locked(g, format, rows.quantized, 1);
  }
  // From the full-precision rows, which are exactly what a bf16 read of the token returns. K and
  // V may have different forms (a layer-aware policy); a bf16 form is a copy of the bf16 rows.
  const int64_t dim = layout_.group(g).head_dim;
  const KvRowForms forms = layout_.forms(g, format);
  const size_t full_row = layout_.row_bytes(g, KvFormat::BF16);
  std::vector<float> values(static_cast<size_t>(dim));
  for (int64_t h = 0; h < layout_.group(g).kv_heads; ++h) {
    for (const bool value : {false, true}) {
      const size_t src = value ? layout_.values_offset(KvFormat::BF16, layer, h) : layout_.keys_offset(KvFormat::BF16, layer, h);
      const size_t dst = value ? layout_.values_offset(format, layer, h) : layout_.keys_offset(format, layer, h);
      const KvFormat f = value ? forms.v : forms.k;
      const bool rotate = rotated(f);
      const size_t row = layout_.row_bytes(g, f);
      for (int64_t r = 0; r < kKvBlockTokens; ++r) {
        const uint8_t* in = rows.full.data() + src + static_cast<size_t>(r) * full_row;
        uint8_t* out = rows.quantized.data() + dst + static_cast<size_t>(r) * row;
        if (f == KvFormat::BF16 && !rotate) {
          std::memcpy(out, in, full_row);
          continue;
        }
        for (int64_t i = 0; i < dim; ++i) {
          uint16_t bits;
          std::memcpy(&bits, in + 2 * i, 2);
          values[static_cast<size_t>(i)] = bf16_to_float(bits);
        }
        encode_kv_row(f, values.data(), dim, rotate, out);
      }
    }
  }
  ++rows.quantized_layers;
  ++quantizations_;
  drop_full_if_unneeded_locked(block);
}

void KvPool::drop_full_if_unneeded_locked(KvBlock& block) {
  if (block.full_pins > 0 || block.full_kept_for_branch || !block.format_known || block.format == KvFormat::BF16) return;
  for (int64_t g = 0; g < layout_.group_count(); ++g) {
    KvGroupRows& rows = block.groups[static_cast<size_t>(g)];
    // A group the layer term keeps at bf16 has no quantized form: its full rows are what is read.
    if (!rows.full.empty() && layout_.quantizes(g, block.format) &&
        rows.quantized_layers == static_cast<int64_t>(layout_.group(g).layers.size()))
      free_rows_locked(rows.full, KvFormat::BF16);
  }
}

void KvPool::unpin_window_locked(KvBlock& block, int64_t group) {
  KvGroupRows& rows = block.groups[static_cast<size_t>(group)];
  if (--rows.window_pins > 0 || rows.kept_for_branch) return;
  free_window_rows_locked(block, group);
}

void KvPool::free_window_rows_locked(KvBlock& block, int64_t group) {
  KvGroupRows& rows = block.groups[static_cast<size_t>(group)];
  // No sequence's window reaches the block in this group any more: neither form is read again
  // (a sequence that needs them would have to reach back, and backs off instead).
  free_rows_locked(rows.full, KvFormat::BF16);
  free_quantized_locked(group, block.format, rows.quantized);
  rows.quantized_layers = 0;
}

void KvPool::hold_locked(KvBlock& block) {
  if (evictable(block)) evictable_.erase({block.last_use, &block});
  ++block.holders;
}

void KvPool::release_locked(KvBlock& block) {
  --block.holders;
  settle_locked(block);
}

void KvPool::settle_locked(KvBlock& block) {
  if (block.holders > 0 || block.children > 0) return;
  if (block.cached)
    evictable_.insert({block.last_use, &block});
  else
    destroy_locked(block);
}

void KvPool::unpin_locked(KvBlock& block) {
  --block.full_pins;
  drop_full_if_unneeded_locked(block);
}

void KvPool::evict_locked(KvBlock& block) {
  evictable_.erase({block.last_use, &block});
  auto [first, last] = cached_.equal_range(block.hash);
  for (auto it = first; it != last; ++it) {
    if (it->second == &block) {
      cached_.erase(it);
      events_.removed(block.hash);
      break;
    }
  }
  KvBlock* parent = block.parent;
  ++evictions_;
  offer_to_disk_locked(block, true);  // before it goes, unless the folder has it
  destroy_locked(block);
  if (parent != nullptr) {
    --parent->children;
    settle_locked(*parent);  // may make the parent evictable in turn
  }
}

void KvPool::destroy_locked(KvBlock& block) {
  for (size_t g = 0; g < block.groups.size(); ++g) {
    free_rows_locked(block.groups[g].full, KvFormat::BF16);
    free_quantized_locked(static_cast<int64_t>(g), block.format, block.groups[g].quantized);
  }
  drop_state_locked(block);
  blocks_.erase(&block);
}

void KvPool::allocate_state_locked(KvBlock& block) {
  if (!block.state.empty()) return;
  const int64_t bytes = layout_.linear().snapshot_bytes();
  reserve_locked(static_cast<size_t>(bytes));
  block.state.assign(static_cast<size_t>(layout_.linear().snapshot_floats), 0.0f);
  block.state_ready = false;
  used_ += bytes;
  state_bytes_ += bytes;
  ++state_snapshots_;
}

void KvPool::drop_state_locked(KvBlock& block) {
  if (block.state.empty()) return;
  const int64_t bytes = layout_.linear().snapshot_bytes();
  std::vector<float>().swap(block.state);
  block.state_ready = block.state_kept = false;
  used_ -= bytes;
  state_bytes_ -= bytes;
  --state_snapshots_;
}

KvBlock* KvPool::find_cached_locked(uint64_t hash, const KvBlock* parent, std::span<const int32_t> tokens,
                                    KvFormat format, uint64_t cache_salt) const {
  auto [first, last] = cached_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    KvBlock* b = it->second;
    if (b->parent == parent && b->cache_salt == cache_salt && b->format == format &&
        std::equal(tokens.begin(), tokens.end(), b->tokens.begin()))
      return b;
  }
  return nullptr;
}

void KvPool::insert_cached_locked(KvBlock& block, uint64_t hash, KvBlock* parent, std::span<const int32_t> tokens,
                                  uint64_t cache_salt) {
  block.cached = true;
  block.hash = hash;
  block.parent = parent;
  block.cache_salt = cache_salt;
  std::copy(tokens.begin(), tokens.end(), block.tokens.begin());
  block.check = kv_chain_check(parent != nullptr ? parent->check : kv_check_root(kv_salted_root(chain_root_, cache_salt)),
                               tokens, block.format);
  if (parent != nullptr) {
    if (evictable(*parent)) evictable_.erase({parent->last_use, parent});
    ++parent->children;
  }
  cached_.emplace(hash, &block);
  events_.stored(hash, parent != nullptr ? parent->hash : kv_salted_root(chain_root_, cache_salt));
  // Written as soon as it is published (a copy, queued by offer_published_to_disk), so a crash or
  // SIGTERM loses little; a full queue leaves it for its eviction.
  if (disk_ && !block.on_disk) disk_offers_.emplace_back(&block, hash);
}

void KvPool::offer_published_to_disk() {
  if (!disk_) return;
  MutexLock lock(mu_);
  // In publishing order: should the queue fill up, the chain's first blocks, which every reuse
  // needs, are the ones written.
  while (!disk_offers_.empty()) {
    const auto [block, hash] = disk_offers_.front();
    disk_offers_.pop_front();
    auto it = blocks_.find(block);
    if (it != blocks_.end() && it->second->cached && it->second->hash == hash) offer_to_disk_locked(*block, false);
    lock.unlock();  // stats() and other threads' calls get in between blocks
    lock.lock();
  }
}

}  // namespace keel::kv
