#pragma once
// The paged pool's unit of storage and the recent window, shared by the pool, the sequences and
// the footprint arithmetic so they can never disagree about which rows are read at full precision.
//
// The window is block-granular: a query at position p reads block b at full precision when any of
// b's tokens is among the last `recent` positions of [0, p], or when b is not yet complete (its
// format is not final until all of its tokens are known). Every other block is read from its
// quantized form. This is a pure function of (b, p, recent), which is what makes cache reuse exact.
//
// Sliding-window layers add a second, independent window: a query at p reads only positions
// [ops::first_attended_position(p, window), p] (keel/ops/attention_params.h), so blocks wholly
// before that are never read again by the sequence, and the pool frees their rows in those layers.
//
// Pure functions: any thread.
#include <algorithm>
#include <cstdint>

#include "keel/ops/attention_params.h"

namespace keel::kv {

inline constexpr int64_t kKvBlockTokens = 16;

// The first block a query at position `p` reads at full precision; blocks below it are complete
// and read from their quantized form (if their format is below bf16).
constexpr int64_t window_start_block(int64_t p, int64_t recent) {
  const int64_t first_recent = p + 1 - recent;  // first position inside the recent window
  return first_recent <= 0 ? 0 : first_recent / kKvBlockTokens;
}

// The first block a sequence of n tokens keeps at full precision: every block that a query among
// its last `recent` positions reads at full precision. Recomputing from any point inside the
// recent window reads only these, so a branch there costs just the tokens after it (keeping only
// the window itself would force a recompute from the start: each window needs the one before it).
constexpr int64_t full_rows_kept_from(int64_t n, int64_t recent) { return window_start_block(n - 1 - recent, recent); }

constexpr int64_t blocks_for_tokens(int64_t tokens) { return (tokens + kKvBlockTokens - 1) / kKvBlockTokens; }

// The first block a query at position p reads in a layer with this sliding window (0: no window,
// every block).
inline int64_t sliding_start_block(int64_t p, int64_t window) {
  return ops::first_attended_position(p, window) / kKvBlockTokens;
}

// The first block a sequence of n tokens keeps in a sliding layer: every block that a query at
// n - kKvBlockTokens or later reads. One block more than the next query needs, so that the next
// turn of a conversation, which the prefix cache resumes at the last complete block boundary (up to
// 15 tokens back), and a retry of the last token still find their rows. A branch further back than
// that needs rows that are gone and recomputes (see KvSequence::trim).
inline int64_t window_rows_kept_from(int64_t n, int64_t window) {
  return sliding_start_block(std::max<int64_t>(n - kKvBlockTokens, 0), window);
}

// Block 1 covers positions 16..31; with recent = 256 the query at 287 still sees position 32 at full
// precision, so blocks 0 and 1 are out of its window.
static_assert(window_start_block(287, 256) == 2);
static_assert(window_start_block(286, 256) == 1);
// Without a recent window a block leaves the window as soon as its last token is written.
static_assert(window_start_block(15, 0) == 1);
static_assert(window_start_block(14, 0) == 0);
static_assert(full_rows_kept_from(300, 32) == 14 && window_start_block(299, 32) == 16);

}  // namespace keel::kv
