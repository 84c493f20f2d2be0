#include "keel/kv/kv_sequence.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "keel/kv/kv_attention.h"
#include "keel/kv/kv_block_hash.h"
#include "keel/kv/kv_pool.h"
#include "keel/util/error.h"
#include "keel/util/half.h"

namespace keel::kv {

KvSequence::KvSequence(KvPool& pool, uint64_t cache_salt)
    : pool_(pool),
      cache_salt_(cache_salt),
      window_from_(static_cast<size_t>(pool.layout().group_count()), 0),
      quantized_upto_(static_cast<size_t>(pool.layout().layers()), 0) {
  for (const ops::LinearAttentionShape& shape : pool.layout().linear().shapes) linear_.emplace_back(shape);
}

KvSequence::~KvSequence() {
  MutexLock lock(pool_.mu_);
  release_from_locked(0);
  if (live_state_counted_) {
    pool_.used_ -= pool_.layout().linear().live_bytes();
    pool_.state_bytes_ -= pool_.layout().linear().live_bytes();
  }
}

int64_t KvSequence::capacity() const { return pool_.max_context(); }

void KvSequence::append_tokens(std::span<const int32_t> ids, std::span<const chat::Role> roles) {
  if (ids.size() != roles.size())
    throw Error("KV sequence: " + std::to_string(ids.size()) + " token ids but " + std::to_string(roles.size()) + " roles");
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  roles_.insert(roles_.end(), roles.begin(), roles.end());
  advance_preamble();
}

void KvSequence::advance_preamble() {
  preamble_end_ = std::min(preamble_end_, roles_.size());
  while (preamble_end_ < roles_.size() &&
         (roles_[preamble_end_] == chat::Role::scaffolding || roles_[preamble_end_] == chat::Role::system ||
          roles_[preamble_end_] == chat::Role::tools))
    ++preamble_end_;
}

int64_t KvSequence::prepare_pass() {
  const auto n = static_cast<int64_t>(ids_.size()) - size_;
  if (n <= 0) return 0;
  const KvBlockLayout& layout = pool_.layout();
  MutexLock lock(pool_.mu_);
  while (static_cast<int64_t>(blocks_.size()) < blocks_for_tokens(size_ + n)) blocks_.push_back(pool_.new_block_locked());
  // The recurrent-state snapshots the pass will write, allocated now so the pass cannot run out.
  if (!linear_.empty())
    for (int64_t pos = (size_ / kKvBlockTokens + 1) * kKvBlockTokens; pos <= size_ + n; pos += kKvBlockTokens)
      if (wants_state_at(pos)) allocate_state_locked(pos);
  // Blocks the pass's last position leaves behind its recent window get quantized rows in each
  // group, unless they have them already or stay bf16. (Counted whatever a sliding window would
  // skip: an upper bound.)
  const int64_t target = std::min<int64_t>(window_start_block(size_ + n - 1, pool_.policy().recent()),
                                           static_cast<int64_t>(blocks_.size()));
  int64_t bytes = 0;
  for (int64_t g = 0; g < layout.group_count(); ++g) {
    int64_t from = target;
    for (int64_t layer : layout.group(g).layers) from = std::min(from, quantized_upto_[static_cast<size_t>(layer)]);
    for (int64_t b = from; b < target; ++b) {
      const KvFormat format = final_format_locked(b);
      if (!layout.quantizes(g, format) || !blocks_[static_cast<size_t>(b)]->groups[static_cast<size_t>(g)].quantized.empty())
        continue;
      bytes += static_cast<int64_t>(layout.group_bytes(g, format));
    }
  }
  return bytes;
}

void KvSequence::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  const KvBlockLayout& layout = pool_.layout();
  if (layer < 0 || layer >= layout.layers()) throw InternalError("KV layer " + std::to_string(layer) + " out of range");
  if (pos < size_) throw InternalError("KV position " + std::to_string(pos) + " is already complete");
  if (pos >= static_cast<int64_t>(ids_.size()))
    throw Error("KV sequence: position " + std::to_string(pos) +
                " has no token id and role; call append_tokens() before the forward pass");
  const auto b = static_cast<size_t>(pos / kKvBlockTokens);
  // Every block a pass writes was taken before it (prepare_pass): memory runs out only there.
  if (b >= blocks_.size())
    throw InternalError("KV position " + std::to_string(pos) + " has no block: call prepare_pass() before the pass");
  const int64_t g = layout.group_of(layer), index = layout.index_in_group(layer);
  KvBlock& block = *blocks_[b];
  KvGroupRows& rows = block.groups[static_cast<size_t>(g)];
  if (block.cached || rows.full.empty()) throw InternalError("KV write into a shared or quantized block");

  // Full precision is bf16, rounded to nearest even.
  const size_t row = layout.row_bytes(g, KvFormat::BF16);
  const auto r = static_cast<size_t>(pos % kKvBlockTokens);
  const int64_t dim = layout.group(g).head_dim;
  for (int64_t h = 0; h < layout.group(g).kv_heads; ++h) {
    uint8_t* kd = rows.full.data() + layout.keys_offset(KvFormat::BF16, layer, h) + r * row;
    uint8_t* vd = rows.full.data() + layout.values_offset(KvFormat::BF16, layer, h) + r * row;
    for (int64_t i = 0; i < dim; ++i) {
      const uint16_t kb = float_to_bf16(k[h * dim + i]), vb = float_to_bf16(v[h * dim + i]);
      std::memcpy(kd + 2 * i, &kb, 2);
      std::memcpy(vd + 2 * i, &vb, 2);
    }
  }

  // Blocks that left this position's window are complete in this layer: quantize them now, before
  // any query of this layer runs. Queries at earlier positions of the same pass still find the
  // full-precision rows, which stay until set_size() ends the pass. In a sliding layer, a block
  // before this position's sliding window is read by no query from here on (queries before this
  // position read it at full precision): it is not quantized, and its rows go at the end of the
  // pass. So a sliding layer quantizes only when its window is wider than the recent window.
  const int64_t target = std::min<int64_t>(window_start_block(pos, pool_.policy().recent()),
                                           static_cast<int64_t>(blocks_.size()));
  int64_t& done = quantized_upto_[static_cast<size_t>(layer)];
  if (done < target) {
    MutexLock lock(pool_.mu_);
    const int64_t lower = sliding_start_block(pos, layout.group(g).window);
    for (; done < target; ++done) {
      KvBlock& q = *blocks_[static_cast<size_t>(done)];
      if (!layout.quantizes(g, final_format_locked(done)) || done < lower) continue;
      if (q.groups[static_cast<size_t>(g)].quantized_layers <= index) pool_.quantize_layer_locked(q, layer);
    }
  }
}

void KvSequence::attend(int64_t layer, int64_t kv_head, std::span<const ops::AttentionQuery> queries,
                        const ops::AttentionParams& params) const {
  const KvBlockLayout& layout = pool_.layout();
  if (layer < 0 || layer >= layout.layers() || kv_head < 0 || kv_head >= layout.group(layout.group_of(layer)).kv_heads)
    throw InternalError("KV attention at layer " + std::to_string(layer) + ", KV head " + std::to_string(kv_head) +
                        " is out of range");
  const int64_t g = layout.group_of(layer), index = layout.index_in_group(layer);
  const KvLayerGroup& group = layout.group(g);
  if (group.window > 0 && (params.window <= 0 || params.window > group.window))
    throw InternalError("KV layer " + std::to_string(layer) + " keeps only its sliding window of " +
                        std::to_string(group.window) + " positions, but attention asked for " +
                        (params.window > 0 ? "a window of " + std::to_string(params.window) : "every position"));
  if (queries.empty()) return;

  // A query at p reads block b quantized when b < window_start_block(p, recent) and the block's
  // format is below bf16. Queries sorted by that boundary form groups that read every block alike:
  // a group grows while the blocks between its boundaries are all bf16.
  const int64_t recent = pool_.policy().recent();
  thread_local std::vector<std::pair<int64_t, size_t>> order;  // (full-precision boundary, query index)
  thread_local std::vector<ops::AttentionQuery> members;
  thread_local std::vector<KvSpan> spans;  // attention runs per (row block, head): keep the allocations
  order.clear();
  for (size_t i = 0; i < queries.size(); ++i) order.emplace_back(window_start_block(queries[i].pos, recent), i);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  auto all_bf16 = [&](int64_t from, int64_t to) {
    to = std::min<int64_t>(to, static_cast<int64_t>(blocks_.size()));
    for (int64_t b = from; b < to; ++b)
      if (layout.quantizes(g, blocks_[static_cast<size_t>(b)]->format)) return false;
    return true;
  };

  for (size_t begin = 0; begin < order.size();) {
    const int64_t full_from = order[begin].first;
    size_t end = begin + 1;
    while (end < order.size() && all_bf16(order[end - 1].first, order[end].first)) ++end;
    members.clear();
    int64_t min_pos = INT64_MAX, max_pos = 0;
    for (size_t m = begin; m < end; ++m) {
      members.push_back(queries[order[m].second]);
      min_pos = std::min(min_pos, members.back().pos);
      max_pos = std::max(max_pos, members.back().pos);
    }
    begin = end;

    // Blocks before the earliest query's sliding window are not passed at all (a sliding group may
    // have freed them); attend_spans skips each query's rows before its window.
    const int64_t first = sliding_start_block(min_pos, params.window);
    const int64_t n_pos = max_pos + 1;
    const int64_t n_blocks = blocks_for_tokens(n_pos);
    if (n_blocks > static_cast<int64_t>(blocks_.size())) throw InternalError("KV attention beyond the stored positions");
    spans.clear();
    for (int64_t b = first; b < n_blocks; ++b) {
      const KvBlock& block = *blocks_[static_cast<size_t>(b)];
      const KvGroupRows& rows = block.groups[static_cast<size_t>(g)];
      const bool quantized = b < full_from && layout.quantizes(g, block.format);
      if (quantized ? rows.quantized_layers <= index : rows.full.empty())
        throw InternalError("KV rows of layer " + std::to_string(layer) + " at positions " +
                            std::to_string(b * kKvBlockTokens) + ".." + std::to_string(b * kKvBlockTokens + 15) +
                            " are gone but the query at " + std::to_string(max_pos) + " reads them");
      const KvFormat format = quantized ? block.format : KvFormat::BF16;
      const KvRowForms forms = layout.forms(g, format);
      const uint8_t* data = quantized ? rows.quantized.data() : rows.full.data();
      KvSpan span{forms.k, pool_.rotated(forms.k), data + layout.keys_offset(format, layer, kv_head),
                  data + layout.values_offset(format, layer, kv_head),
                  std::min(kKvBlockTokens, n_pos - b * kKvBlockTokens), layout.row_bytes(g, forms.k)};
      if (forms.v != forms.k) span.values = KvValueForm{forms.v, pool_.rotated(forms.v), layout.row_bytes(g, forms.v)};
      spans.push_back(span);
    }
    attend_spans(group.head_dim, params, spans, first * kKvBlockTokens, members);
  }
}

void KvSequence::set_size(int64_t n) {
  if (n < 0 || n > capacity()) throw Error("KV cache size " + std::to_string(n) + " out of range");
  MutexLock lock(pool_.mu_);
  if (n > size_) {
    if (pool_.layout().group_count() == 0)  // no layer stores rows (only linear ones): blocks carry ids and snapshots
      while (static_cast<int64_t>(blocks_.size()) < blocks_for_tokens(n)) blocks_.push_back(pool_.new_block_locked());
    if (n > static_cast<int64_t>(ids_.size()) || blocks_for_tokens(n) > static_cast<int64_t>(blocks_.size()))
      throw InternalError("KV size set beyond the stored positions");
    for (const ops::LinearLayerState& state : linear_)
      if (state.position() != n) throw InternalError("a linear-attention layer ran to " + std::to_string(state.position()) +
                                                     " in a pass that ends at " + std::to_string(n));
    const int64_t before = size_;
    size_ = n;
    settle_states_locked(before);
    // The pass quantized, in every layer, each block out of the window of its last position. The
    // full-precision rows of those a branch inside the recent window could still need stay; the
    // others go unless another sequence still reads them.
    const auto unpin_to =
        std::min(static_cast<size_t>(full_rows_kept_from(n, pool_.policy().recent())), blocks_.size());
    for (size_t i = pinned_from_; i < unpin_to; ++i) pool_.unpin_locked(*blocks_[i]);
    pinned_from_ = std::max(pinned_from_, unpin_to);
    // Sliding groups let go of the blocks their window no longer reaches; the rows go with the
    // last sequence that held them there.
    const KvBlockLayout& layout = pool_.layout();
    for (int64_t g = 0; g < layout.group_count(); ++g) {
      const int64_t window = layout.group(g).window;
      if (window == 0) continue;
      size_t& from = window_from_[static_cast<size_t>(g)];
      const auto to = std::min(static_cast<size_t>(window_rows_kept_from(n, window)), blocks_.size());
      for (size_t i = from; i < to; ++i) pool_.unpin_window_locked(*blocks_[i], g);
      from = std::max(from, to);
    }
    return;
  }
  if (n == size_) {
    // After a failed pass: linear layers that ran past a tile boundary resume at a snapshot.
    cut_locked(resume_linear_locked(longest_exact_prefix_locked(n)));
    return;
  }
  const int64_t m = linear_resume_point_locked(longest_exact_prefix_locked(n));
  if (m != n)
    throw Error("the KV cache cannot be cut back to " + std::to_string(n) + " tokens exactly: rows or recurrent state "
                "that positions from " + std::to_string(n) + " on read are gone (quantized-only blocks inside the "
                "recent window, a sliding-window layer's rows, or no state snapshot there), so the sequence must be "
                "recomputed from " + std::to_string(m) + " (KvSequence::trim)");
  resume_linear_locked(n);
  cut_locked(n);
}

ops::LinearLayerState& KvSequence::linear_state(int64_t layer) {
  const int64_t i = pool_.layout().linear().index_of(layer);
  if (i < 0) throw InternalError("layer " + std::to_string(layer) + " is not a linear-attention layer");
  return linear_[static_cast<size_t>(i)];
}

bool KvSequence::kept_state_at(int64_t pos) const {
  // The preamble's end: where agents that share a system prompt and tools part ways.
  const bool preamble = preamble_end_ < roles_.size() &&
                        pos == static_cast<int64_t>(preamble_end_) / kKvBlockTokens * kKvBlockTokens;
  return (pos / kKvBlockTokens) % pool_.state_interval() == 0 || preamble;
}

bool KvSequence::wants_state_at(int64_t pos) const {
  if (pos <= 0 || pos % kKvBlockTokens != 0) return false;
  const int64_t last = static_cast<int64_t>(ids_.size()) / kKvBlockTokens * kKvBlockTokens;
  return kept_state_at(pos) || pos == last;
}

void KvSequence::allocate_state_locked(int64_t pos) {
  const auto b = static_cast<size_t>(pos / kKvBlockTokens - 1);
  while (blocks_.size() <= b) blocks_.push_back(pool_.new_block_locked());
  KvBlock& block = *blocks_[b];
  if (!block.state.empty()) return;
  pool_.allocate_state_locked(block);
  if (kept_state_at(pos))
    block.state_kept = true;
  else
    rolling_states_.push_back(b);
}

float* KvSequence::linear_snapshot(int64_t layer, int64_t pos) {
  const int64_t i = pool_.layout().linear().index_of(layer);
  if (i < 0 || !wants_state_at(pos) || pos <= size_) return nullptr;
  MutexLock lock(pool_.mu_);
  const auto b = static_cast<size_t>(pos / kKvBlockTokens - 1);
  if (b >= blocks_.size() || blocks_[b]->state.empty())
    throw InternalError("no state snapshot at position " + std::to_string(pos) + ": call prepare_pass() before the pass");
  return blocks_[b]->state.data() + pool_.layout().linear().offsets[static_cast<size_t>(i)];
}

void KvSequence::settle_states_locked(int64_t before) {
  if (linear_.empty()) return;
  // Every linear layer wrote the snapshots of the boundaries this pass reached.
  for (int64_t pos = (before / kKvBlockTokens + 1) * kKvBlockTokens; pos <= size_; pos += kKvBlockTokens) {
    KvBlock& block = *blocks_[static_cast<size_t>(pos / kKvBlockTokens - 1)];
    if (!block.state.empty()) block.state_ready = true;
  }
  // Only the latest rolling snapshot stays, published or not: a sequence that lives for many turns
  // would otherwise hold one per turn on blocks nothing can evict while it holds them.
  if (rolling_states_.size() < 2) return;
  const size_t latest = *std::max_element(rolling_states_.begin(), rolling_states_.end());
  for (size_t b : rolling_states_) {
    KvBlock& block = *blocks_[b];
    if (b != latest && !block.state_kept) pool_.drop_state_locked(block);
  }
  rolling_states_.assign(1, latest);
}

int64_t KvSequence::linear_resume_point_locked(int64_t m) const {
  if (linear_.empty()) return m;
  const bool live = std::all_of(linear_.begin(), linear_.end(), [&](const ops::LinearLayerState& s) {
    return m >= s.tile_start() && m <= s.position();
  });
  if (live) return m;
  for (int64_t pos = m / kKvBlockTokens * kKvBlockTokens; pos > 0; pos -= kKvBlockTokens) {
    const auto b = static_cast<size_t>(pos / kKvBlockTokens - 1);
    if (b < blocks_.size() && blocks_[b]->state_ready) return pos;
  }
  return 0;
}

int64_t KvSequence::resume_linear_locked(int64_t m) {
  const int64_t p = linear_resume_point_locked(m);
  if (linear_.empty()) return p;
  const KvLinearLayers& layers = pool_.layout().linear();
  const bool live = std::all_of(linear_.begin(), linear_.end(), [&](const ops::LinearLayerState& s) {
    return p >= s.tile_start() && p <= s.position();
  });
  for (size_t i = 0; i < linear_.size(); ++i) {
    if (live)
      linear_[i].rewind(p);
    else if (p == 0)
      linear_[i].reset();
    else
      linear_[i].restore(blocks_[static_cast<size_t>(p / kKvBlockTokens - 1)]->state.data() + layers.offsets[i], p);
  }
  return p;
}

int64_t KvSequence::trim(int64_t n) {
  if (n < 0) throw Error("KV trim to a negative size");
  MutexLock lock(pool_.mu_);
  if (n >= size_) {
    ids_.resize(std::min(ids_.size(), static_cast<size_t>(n)));
    roles_.resize(ids_.size());
    return size_;
  }
  cut_locked(resume_linear_locked(longest_exact_prefix_locked(n)));
  return size_;
}

int64_t KvSequence::longest_exact_prefix_locked(int64_t n) const {
  // The next query runs at position m. Every kept block it reads must still have the rows it reads
  // there: full precision inside its recent window and in the partly kept last block (written
  // again), either form elsewhere; in a sliding group only the blocks its window reaches.
  const KvBlockLayout& layout = pool_.layout();
  int64_t m = std::min(n, static_cast<int64_t>(blocks_.size()) * kKvBlockTokens);
  while (m > 0) {
    const int64_t kept = blocks_for_tokens(m);
    const int64_t full_from = std::min(window_start_block(m, pool_.policy().recent()), m / kKvBlockTokens);
    int64_t missing = -1;
    for (int64_t g = 0; g < layout.group_count(); ++g) {
      const KvLayerGroup& group = layout.group(g);
      const auto group_layers = static_cast<int64_t>(group.layers.size());
      const int64_t read_from = sliding_start_block(m, group.window);
      const int64_t full_needed_from = std::max(full_from, read_from);
      // A group without a window never lacks the quantized rows below its recent window: its
      // full-precision rows go only once every layer of the group is quantized.
      const int64_t scan_from = group.window > 0 ? read_from : full_needed_from;
      for (int64_t b = kept - 1; b > missing && b >= scan_from; --b) {
        const KvBlock& block = *blocks_[static_cast<size_t>(b)];
        const KvGroupRows& rows = block.groups[static_cast<size_t>(g)];
        const bool quantized_readable = b < full_needed_from && block.format_known &&
                                        layout.quantizes(g, block.format) && rows.quantized_layers == group_layers;
        if (rows.full.empty() && !quantized_readable) {
          missing = b;
          break;
        }
      }
    }
    if (missing < 0) return m;
    m = missing * kKvBlockTokens;  // recompute from the block that lost its rows
  }
  return 0;
}

void KvSequence::cut_locked(int64_t m) {
  const KvBlockLayout& layout = pool_.layout();
  const auto kept = static_cast<size_t>(blocks_for_tokens(m));
  const bool partial = m % kKvBlockTokens != 0;
  // A partly kept block is written again: it must be private. Copy first (this may throw when the
  // pool is exhausted, before anything changed).
  KvBlock* copy = partial && blocks_[kept - 1]->cached ? pool_.copy_block_locked(*blocks_[kept - 1]) : nullptr;

  // Pin what a sequence of m tokens keeps (full-precision rows, sliding windows) before unpinning
  // anything, so no row still needed is dropped in between.
  const auto full_from =
      static_cast<size_t>(std::min(full_rows_kept_from(m, pool_.policy().recent()), m / kKvBlockTokens));
  for (size_t i = full_from; i < std::min(pinned_from_, kept); ++i) ++blocks_[i]->full_pins;
  const size_t new_pinned_from = std::min(pinned_from_, full_from);
  std::vector<size_t> new_window_from = window_from_;
  for (int64_t g = 0; g < layout.group_count(); ++g) {
    const int64_t window = layout.group(g).window;
    if (window == 0) continue;
    const auto from = static_cast<size_t>(window_rows_kept_from(m, window));
    const size_t old_from = window_from_[static_cast<size_t>(g)];
    for (size_t i = from; i < std::min(old_from, kept); ++i) pool_.pin_window_locked(*blocks_[i], g);
    new_window_from[static_cast<size_t>(g)] = std::min(old_from, from);
  }
  release_from_locked(kept);
  pinned_from_ = new_pinned_from;
  window_from_ = std::move(new_window_from);
  std::erase_if(rolling_states_, [&](size_t b) { return b >= kept; });
  if (branch_state_ != SIZE_MAX && branch_state_ >= kept) branch_state_ = SIZE_MAX;

  if (copy != nullptr) {
    // The shared block keeps its rows for whoever else reads them; the copy (pinned in full) takes
    // over this sequence's pins.
    KvBlock* shared = blocks_[kept - 1];
    --shared->full_pins;
    for (int64_t g = 0; g < layout.group_count(); ++g)
      if (layout.group(g).window > 0) --shared->groups[static_cast<size_t>(g)].window_pins;
    pool_.release_locked(*shared);
    blocks_[kept - 1] = copy;
  } else if (partial) {
    KvBlock& last = *blocks_[kept - 1];  // private: forget a quantization made when it was complete
    for (size_t g = 0; g < last.groups.size(); ++g) {
      pool_.free_quantized_locked(static_cast<int64_t>(g), last.format, last.groups[g].quantized);
      last.groups[g].quantized_layers = 0;
    }
    last.format_known = false;
    last.format = KvFormat::BF16;
    pool_.drop_state_locked(last);  // the state after its last token, which runs again
    std::erase(rolling_states_, kept - 1);
    if (branch_state_ == kept - 1) branch_state_ = SIZE_MAX;
  }
  ids_.resize(static_cast<size_t>(m));
  roles_.resize(static_cast<size_t>(m));
  advance_preamble();
  size_ = m;
  std::fill(quantized_upto_.begin(), quantized_upto_.end(), 0);  // the next pass re-checks every block
}

void KvSequence::release_from_locked(size_t first_block) {
  const KvBlockLayout& layout = pool_.layout();
  for (size_t i = blocks_.size(); i-- > first_block;) {
    // No rows are dropped here: a released tail keeps what it had, for a branch that comes back.
    KvBlock& block = *blocks_[i];
    if (i >= pinned_from_) --block.full_pins;
    for (int64_t g = 0; g < layout.group_count(); ++g)
      if (layout.group(g).window > 0 && i >= window_from_[static_cast<size_t>(g)])
        --block.groups[static_cast<size_t>(g)].window_pins;
    pool_.release_locked(block);
  }
  blocks_.resize(std::min(first_block, blocks_.size()));
  pinned_from_ = std::min(pinned_from_, blocks_.size());
  for (size_t& from : window_from_) from = std::min(from, blocks_.size());
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

void KvSequence::keep_window_for_branch() {
  MutexLock lock(pool_.mu_);
  // Full precision: the rows this sequence still pins (the recent window at size() and one more).
  for (size_t i = 0; i < blocks_.size(); ++i) {
    KvBlock& block = *blocks_[i];
    const bool keep = i >= pinned_from_;
    if (block.full_kept_for_branch == keep) continue;
    block.full_kept_for_branch = keep;
    if (!keep) pool_.drop_full_if_unneeded_locked(block);
  }
  // Linear layers: the latest snapshot stays as the branch point, instead of an earlier one.
  size_t latest = blocks_.size();
  for (size_t i = static_cast<size_t>(size_ / kKvBlockTokens); i-- > 0;)
    if (blocks_[i]->state_ready) {
      latest = i;
      break;
    }
  if (latest < blocks_.size() && latest != branch_state_) {
    if (branch_state_ < blocks_.size()) {
      KvBlock& old = *blocks_[branch_state_];
      if (!kept_state_at(static_cast<int64_t>(branch_state_ + 1) * kKvBlockTokens)) pool_.drop_state_locked(old);
    }
    blocks_[latest]->state_kept = true;
    std::erase(rolling_states_, latest);
    branch_state_ = latest;
  }
  // Sliding groups: the blocks this sequence's window still reaches.
  const KvBlockLayout& layout = pool_.layout();
  for (int64_t g = 0; g < layout.group_count(); ++g) {
    if (layout.group(g).window == 0) continue;
    const size_t from = window_from_[static_cast<size_t>(g)];
    // An earlier mark of this conversation is behind this one now: its rows may go.
    for (size_t i = 0; i < from; ++i) {
      KvGroupRows& rows = blocks_[i]->groups[static_cast<size_t>(g)];
      if (!rows.kept_for_branch) continue;
      rows.kept_for_branch = false;
      if (rows.window_pins == 0) pool_.free_window_rows_locked(*blocks_[i], g);
    }
    for (size_t i = from; i < blocks_.size(); ++i) blocks_[i]->groups[static_cast<size_t>(g)].kept_for_branch = true;
  }
}

void KvSequence::publish() {
  publish_locked_scope();
  // The disk tier (if any) copies the blocks just published, one at a time, with the pool's lock
  // let go in between: a long prompt's copy never holds the lock for long.
  pool_.offer_published_to_disk();
}

void KvSequence::publish_locked_scope() {
  MutexLock lock(pool_.mu_);
  const KvBlockLayout& layout = pool_.layout();
  const auto complete = static_cast<size_t>(size_ / kKvBlockTokens);
  KvBlock* parent = nullptr;
  for (size_t i = 0; i < complete; ++i) {
    KvBlock* block = blocks_[i];
    if (!block->cached) {
      const KvFormat format = final_format_locked(static_cast<int64_t>(i));
      const auto ids = std::span<const int32_t>(ids_).subspan(i * kKvBlockTokens, kKvBlockTokens);
      const uint64_t root = kv_salted_root(pool_.chain_root_, cache_salt_);
      const uint64_t hash = kv_chain_hash(parent != nullptr ? parent->hash : root, ids, format);
      KvBlock* existing = pool_.find_cached_locked(hash, parent, ids, format, cache_salt_);
      if (existing == nullptr) {
        pool_.insert_cached_locked(*block, hash, parent, ids, cache_salt_);
      } else {
        // The same content was cached meanwhile (or recomputed inside a window): the rows are
        // bit-identical, so keep the cached block, give it whatever rows it lacks, and move this
        // sequence's pins over to it.
        const bool pinned = i >= pinned_from_;
        pool_.hold_locked(*existing);
        if (pinned) ++existing->full_pins;
        for (int64_t g = 0; g < layout.group_count(); ++g) {
          KvGroupRows& have = existing->groups[static_cast<size_t>(g)];
          KvGroupRows& mine = block->groups[static_cast<size_t>(g)];
          if (layout.group(g).window > 0 && i >= window_from_[static_cast<size_t>(g)]) {
            ++have.window_pins;
            --mine.window_pins;
          }
          have.kept_for_branch = have.kept_for_branch || mine.kept_for_branch;
          if (have.full.empty()) have.full.swap(mine.full);
          if (mine.quantized_layers > have.quantized_layers) {
            have.quantized.swap(mine.quantized);
            std::swap(have.quantized_layers, mine.quantized_layers);
          }
        }
        if (pinned) --block->full_pins;
        existing->full_kept_for_branch = existing->full_kept_for_branch || block->full_kept_for_branch;
        if (existing->state.empty() && block->state_ready) {  // bit-identical too: the same tokens ran
          existing->state.swap(block->state);
          existing->state_ready = true;
          block->state_ready = false;
        }
        existing->state_kept = existing->state_kept || block->state_kept;
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
