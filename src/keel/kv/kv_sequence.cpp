#include "keel/kv/kv_sequence.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "keel/kv/kv_attention.h"
#include "keel/kv/kv_block_hash.h"
#include "keel/kv/kv_pool.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel::kv {

KvSequence::KvSequence(KvPool& pool)
    : pool_(pool), quantized_upto_(static_cast<size_t>(pool.layout().layers()), 0) {}

KvSequence::~KvSequence() {
  std::lock_guard lock(pool_.mu_);
  release_from_locked(0);
}

int64_t KvSequence::capacity() const { return pool_.max_context(); }

void KvSequence::append_tokens(std::span<const int32_t> ids, std::span<const chat::Role> roles) {
  if (ids.size() != roles.size())
    throw Error("KV sequence: " + std::to_string(ids.size()) + " token ids but " + std::to_string(roles.size()) + " roles");
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  roles_.insert(roles_.end(), roles.begin(), roles.end());
}

void KvSequence::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  const KvBlockLayout& layout = pool_.layout();
  if (layer < 0 || layer >= layout.layers()) throw Error("internal: KV layer " + std::to_string(layer) + " out of range");
  if (pos < size_) throw Error("internal: KV position " + std::to_string(pos) + " is already complete");
  if (pos >= static_cast<int64_t>(ids_.size()))
    throw Error("KV sequence: position " + std::to_string(pos) +
                " has no token id and role; call append_tokens() before the forward pass");
  const auto b = static_cast<size_t>(pos / kKvBlockTokens);
  if (b > blocks_.size()) throw Error("internal: KV positions must be stored in order");
  if (b == blocks_.size()) {
    std::lock_guard lock(pool_.mu_);
    blocks_.push_back(pool_.new_block_locked());
  }
  KvBlock& block = *blocks_[b];
  if (block.cached || block.full.empty()) throw Error("internal: KV write into a shared or quantized block");

  // Full precision is bf16, rounded to nearest even like the plain cache.
  const size_t row = layout.row_bytes(KvFormat::BF16);
  const auto r = static_cast<size_t>(pos % kKvBlockTokens);
  const int64_t dim = layout.head_dim();
  for (int64_t h = 0; h < layout.kv_heads(); ++h) {
    uint8_t* kd = block.full.data() + layout.keys_offset(KvFormat::BF16, layer, h) + r * row;
    uint8_t* vd = block.full.data() + layout.values_offset(KvFormat::BF16, layer, h) + r * row;
    for (int64_t i = 0; i < dim; ++i) {
      const uint16_t kb = float_to_bf16(k[h * dim + i]), vb = float_to_bf16(v[h * dim + i]);
      std::memcpy(kd + 2 * i, &kb, 2);
      std::memcpy(vd + 2 * i, &vb, 2);
    }
  }

  // Blocks that left this position's window are complete in this layer: quantize them now, before
  // any query of this layer runs. Queries at earlier positions of the same pass still find the
  // full-precision rows, which stay until set_size() ends the pass.
  const int64_t target = std::min<int64_t>(window_start_block(pos, pool_.policy().recent()),
                                           static_cast<int64_t>(blocks_.size()));
  int64_t& done = quantized_upto_[static_cast<size_t>(layer)];
  if (done < target) {
    std::lock_guard lock(pool_.mu_);
    for (; done < target; ++done) {
      KvBlock& q = *blocks_[static_cast<size_t>(done)];
      if (final_format_locked(done) != KvFormat::BF16 && q.quantized_layers <= layer) pool_.quantize_layer_locked(q, layer);
    }
  }
}

void KvSequence::attend(int64_t layer, int64_t head, const float* q, int64_t n_pos, float* /*scratch*/,
                        float* out) const {
  const KvBlockLayout& layout = pool_.layout();
  const ModelSpec& spec = pool_.spec();
  const int64_t kv_head = head / (spec.num_heads / spec.num_kv_heads);  // grouped-query attention
  const int64_t window = window_start_block(n_pos - 1, pool_.policy().recent());
  const int64_t n_blocks = blocks_for_tokens(n_pos);
  if (n_blocks > static_cast<int64_t>(blocks_.size())) throw Error("internal: KV attention beyond the stored positions");
  thread_local std::vector<KvSpan> spans;  // attention runs per (token, head): keep the allocation
  spans.clear();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const KvBlock& block = *blocks_[static_cast<size_t>(b)];
    const bool quantized = b < window && block.format != KvFormat::BF16;
    const KvFormat format = quantized ? block.format : KvFormat::BF16;
    const uint8_t* rows = quantized ? block.quantized.data() : block.full.data();
    spans.push_back(KvSpan{format, quantized && pool_.rotated(format), rows + layout.keys_offset(format, layer, kv_head),
                           rows + layout.values_offset(format, layer, kv_head),
                           std::min(kKvBlockTokens, n_pos - b * kKvBlockTokens), layout.row_bytes(format)});
  }
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(layout.head_dim())));
  attend_spans(q, layout.head_dim(), scale, spans, out);
}

void KvSequence::set_size(int64_t n) {
  if (n < 0 || n > capacity()) throw Error("KV cache size " + std::to_string(n) + " out of range");
  std::lock_guard lock(pool_.mu_);
  if (n > size_) {
    if (n > static_cast<int64_t>(ids_.size()) || blocks_for_tokens(n) > static_cast<int64_t>(blocks_.size()))
      throw Error("internal: KV size set beyond the stored positions");
    size_ = n;
    // The pass quantized, in every layer, each block out of the window of its last position. The
    // full-precision rows of those a branch inside the recent window could still need stay; the
    // others go unless another sequence still reads them.
    const auto unpin_to =
        std::min(static_cast<size_t>(full_rows_kept_from(n, pool_.policy().recent())), blocks_.size());
    for (size_t i = pinned_from_; i < unpin_to; ++i) pool_.unpin_locked(*blocks_[i]);
    pinned_from_ = std::max(pinned_from_, unpin_to);
    return;
  }
  const int64_t m = longest_exact_prefix_locked(n);
  if (m != n)
    throw Error("the KV cache cannot be cut back to " + std::to_string(n) + " tokens exactly: blocks before " +
                std::to_string(n) + " keep only their quantized rows, so the sequence must be recomputed from " +
                std::to_string(m) + " (KvSequence::trim)");
  cut_locked(n);
}

int64_t KvSequence::trim(int64_t n) {
  if (n < 0) throw Error("KV trim to a negative size");
  std::lock_guard lock(pool_.mu_);
  if (n >= size_) {
    ids_.resize(std::min(ids_.size(), static_cast<size_t>(n)));
    roles_.resize(ids_.size());
    return size_;
  }
  cut_locked(longest_exact_prefix_locked(n));
  return size_;
}

int64_t KvSequence::longest_exact_prefix_locked(int64_t n) const {
  // The next query runs at position m. Every kept block it reads at full precision (inside its
  // window, or the partly kept last block that will be written) must still have those rows.
  int64_t m = std::min(n, static_cast<int64_t>(blocks_.size()) * kKvBlockTokens);
  while (m > 0) {
    const int64_t kept = blocks_for_tokens(m);
    const int64_t full_from = std::min(window_start_block(m, pool_.policy().recent()), m / kKvBlockTokens);
    int64_t missing = -1;
    for (int64_t b = kept - 1; b >= full_from; --b) {
      if (blocks_[static_cast<size_t>(b)]->full.empty()) {
        missing = b;
        break;
      }
    }
    if (missing < 0) return m;
    m = missing * kKvBlockTokens;  // recompute from the block that lost its rows
  }
  return 0;
}

void KvSequence::cut_locked(int64_t m) {
  const auto kept = static_cast<size_t>(blocks_for_tokens(m));
  const bool partial = m % kKvBlockTokens != 0;
  // A partly kept block is written again: it must be private. Copy first (this may throw when the
  // pool is exhausted, before anything changed).
  KvBlock* copy = partial && blocks_[kept - 1]->cached ? pool_.copy_block_locked(*blocks_[kept - 1]) : nullptr;

  // Pin what a sequence of m tokens keeps at full precision before unpinning anything, so no row
  // still needed is dropped in between.
  const auto full_from =
      static_cast<size_t>(std::min(full_rows_kept_from(m, pool_.policy().recent()), m / kKvBlockTokens));
  for (size_t i = full_from; i < std::min(pinned_from_, kept); ++i) ++blocks_[i]->full_pins;
  const size_t new_pinned_from = std::min(pinned_from_, full_from);
  release_from_locked(kept);
  pinned_from_ = new_pinned_from;

  if (copy != nullptr) {
    KvBlock* shared = blocks_[kept - 1];
    --shared->full_pins;
    pool_.release_locked(*shared);
    blocks_[kept - 1] = copy;
  } else if (partial) {
    KvBlock& last = *blocks_[kept - 1];  // private: forget a quantization made when it was complete
    pool_.free_rows_locked(last.quantized, last.format);
    last.quantized_layers = 0;
    last.format_known = false;
    last.format = KvFormat::BF16;
  }
  ids_.resize(static_cast<size_t>(m));
  roles_.resize(static_cast<size_t>(m));
  size_ = m;
  std::fill(quantized_upto_.begin(), quantized_upto_.end(), 0);  // the next pass re-checks every block
}

void KvSequence::release_from_locked(size_t first_block) {
  for (size_t i = blocks_.size(); i-- > first_block;) {
    // No rows are dropped here: a released tail keeps what it had, for a branch that comes back.
    if (i >= pinned_from_) --blocks_[i]->full_pins;
    pool_.release_locked(*blocks_[i]);
  }
  blocks_.resize(std::min(first_block, blocks_.size()));
  pinned_from_ = std::min(pinned_from_, blocks_.size());
}

KvFormat KvSequence::final_format_locked(int64_t block) {
  KvBlock& b = *blocks_[static_cast<size_t>(block)];
  if (!b.format_known) {
    const auto at = static_cast<size_t>(block * kKvBlockTokens);
    b.format = pool_.policy().block_format(std::span(roles_).subspan(at, kKvBlockTokens), block * kKvBlockTokens);
    b.format_known = true;
  }
  return b.format;
}

void KvSequence::publish() {
  std::lock_guard lock(pool_.mu_);
  const auto complete = static_cast<size_t>(size_ / kKvBlockTokens);
  KvBlock* parent = nullptr;
  for (size_t i = 0; i < complete; ++i) {
    KvBlock* block = blocks_[i];
    if (!block->cached) {
      const KvFormat format = final_format_locked(static_cast<int64_t>(i));
      const auto ids = std::span<const int32_t>(ids_).subspan(i * kKvBlockTokens, kKvBlockTokens);
      const uint64_t hash = kv_chain_hash(parent != nullptr ? parent->hash : pool_.chain_root_, ids, format);
      KvBlock* existing = pool_.find_cached_locked(hash, parent, ids, format);
      if (existing == nullptr) {
        pool_.insert_cached_locked(*block, hash, parent, ids);
      } else {
        // The same content was cached meanwhile (or recomputed inside a window): the rows are
        // bit-identical, so keep the cached block and give it whatever rows it lacks.
        const bool pinned = i >= pinned_from_;
        pool_.hold_locked(*existing);
        if (pinned) ++existing->full_pins;
        if (existing->full.empty()) existing->full.swap(block->full);
        if (block->quantized_layers > existing->quantized_layers) {
          existing->quantized.swap(block->quantized);
          std::swap(existing->quantized_layers, block->quantized_layers);
        }
        if (pinned) --block->full_pins;
        pool_.release_locked(*block);  // private: frees the rows it still has
        pool_.drop_full_if_unneeded_locked(*existing);
        blocks_[i] = existing;
        block = existing;
      }
    }
    pool_.touch_locked(*block);
    parent = block;
  }
}

}  // namespace keel::kv
