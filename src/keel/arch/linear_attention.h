#pragma once
// The Gated DeltaNet block of Qwen3-Next's linear-attention layers: x += out_proj(norm(core) *
// silu(z)), where core is the gated delta rule (keel/ops/gated_delta_rule.h) over the short causal
// conv of [q | k | v], all projected from norm(x) by in_proj_qkvz and in_proj_ba. Each sequence's
// recurrent state is its KV cache's (KvCache::linear_state); at the tile boundaries the cache
// asks for, the state is saved as a snapshot (KvCache::linear_snapshot).
//
// Thread-safety: as blocks.h (the engine thread; work fans out over the pool by value head).
#include <cstdint>

#include "keel/arch/blocks.h"

namespace keel::arch {

// x += gated_deltanet(norm(x)) for the n rows placed by ws.rows (each sequence's rows contiguous,
// in position order, starting at its state's position).
void linear_attention_block(const ModelSpec& spec, const LayerSpec& ls, const LayerWeights& w, int64_t layer, int64_t n,
                            ThreadPool& pool, Workspace& ws);

}  // namespace keel::arch
