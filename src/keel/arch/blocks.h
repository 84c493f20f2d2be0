#pragma once
// The shared blocks every family's forward pass is built from: the residual-stream norm, the
// attention block (projections, bias, q/k norm, rope, KV store, attention with the layer's
// AttentionParams, output projection, optional post-norm) and the gated FFN (activation as a
// parameter, optional post-norm). A layer picks each variant from its LayerSpec.
//
// Thread-safety: a Workspace belongs to one forward pass at a time (the engine thread); the blocks
// fan work out over the given ThreadPool and return when it is done.
#include <cstdint>
#include <utility>
#include <vector>

#include "keel/kv/kv_cache.h"
#include "keel/model/model_spec.h"
#include "keel/model/weights.h"
#include "keel/ops/elementwise.h"
#include "keel/util/thread_pool.h"

namespace keel::arch {

// Where one row of a forward pass belongs: its position and the sequence whose K/V it stores and
// reads. A pass may carry the tokens of several sequences (a batch): each sequence's rows are
// contiguous and in position order, and no row sees another sequence's keys.
struct RowPlace {
  int64_t pos = 0;
  KvCache* cache = nullptr;
};

// Activations of the tokens of one forward pass; grown as needed, reused between passes.
struct Workspace {
  std::vector<RowPlace> rows;     // (n) each row's position and sequence
  std::vector<float> x;           // (n, dim) the residual stream
  std::vector<float> h;           // (n, dim) normed input of a block, then its output
  std::vector<float> q;           // (n, q_dim)
  std::vector<float> k, v;        // (n, kv_dim)
  std::vector<float> attn;        // (n, q_dim) attention output before the output projection
  std::vector<float> attn_gate;   // gated attention: (n, 2 q_dim) q_proj's output, then (n, q_dim) the gate
  std::vector<float> gate, up;    // (n, ffn)
  std::vector<std::pair<int64_t, int64_t>> attention_rows;  // [first, end) row blocks of one sequence each
  // Mixture of experts
  std::vector<float> router;        // (n, experts) router logits, then probabilities
  std::vector<int64_t> chosen;      // (n, experts_per_token) expert of each routed slot
  std::vector<float> chosen_weight;  // (n, experts_per_token) its weight
  std::vector<int64_t> expert_tokens;  // (n * experts_per_token) each routed slot's token, grouped by expert
  std::vector<float> expert_weights;   // (n * experts_per_token) those slots' weights
  std::vector<float> expert_in;     // (n * experts_per_token, dim) the slots' inputs, then their experts' outputs
  std::vector<float> moe_out;       // (n, dim) the weighted sum of the experts' outputs
  std::vector<float> dense;         // (n, dim) the dense branch beside the experts, or the shared expert's output
  // Linear attention (arch/linear_attention.h)
  struct {
    std::vector<float> qkvz;    // (n, 2 keys + 2 values) in_proj_qkvz's output, grouped per key head
    std::vector<float> ba;      // (n, 2 value_heads) in_proj_ba's output, grouped per key head
    std::vector<float> mixed;   // (n, channels) the conv's input [q | k | v]
    std::vector<float> qkv;     // (n, channels) its output, q and k then normalised
    std::vector<float> z;       // (n, values) the output gate
    std::vector<float> g, beta;  // (n, value_heads) log decay and update strength
    std::vector<float> core;    // (n, values) the delta rule's output
  } linear;
};

// out[t] = norm(in[t]) for `n` rows of the model's width.
void norm_rows(const ModelSpec& spec, const std::vector<float>& weight, const float* in, int64_t n, float* out);

// x += attention(norm(x)) for the n rows placed by ws.rows: each stores its K/V at its position
// in its own sequence and attends over that sequence's positions up to its own.
void attention_block(const ModelSpec& spec, const LayerSpec& ls, const LayerWeights& w, int64_t layer,
                     const ops::Rope& rope, int64_t n, ThreadPool& pool, Workspace& ws);

// x += ffn(norm(x)) with the layer's gated activation.
void gated_ffn_block(const ModelSpec& spec, const LayerSpec& ls, const LayerWeights& w, int64_t n, ThreadPool& pool,
                     Workspace& ws);

// x += moe(norm(x)): the router picks experts_per_token experts per token (MoeSpec says how they
// are weighted); each expert runs its gated FFN (or gpt-oss's fused, clamped one) once over all
// the tokens routed to it, and a token's output is the weighted sum of its experts', added in
// expert order. Only the chosen experts' weights are read. With MoeSpec::beside_dense (Gemma 4) the
// dense FFN runs too, and the two branches are normed, summed and normed again.
void moe_ffn_block(const ModelSpec& spec, const LayerSpec& ls, const LayerWeights& w, int64_t n, ThreadPool& pool,
                   Workspace& ws);

}  // namespace keel::arch
