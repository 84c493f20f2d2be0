#pragma once
// The forward-pass cycle every caller of the model goes through, and the one-sequence loops built
// on it. run_pass is the only caller of Transformer::forward: the scheduler's batched steps, chat
// turns run alone (run_turn: eval, tests), `keel run`'s raw generation, `keel bench`, eval's
// fidelity runs and the golden tests all run their passes through it. The cycle, for every
// sequence of a pass:
//   1. append the pass's tokens and roles (KvSequence::append_tokens);
//   2. take the KV blocks their rows go to, and free in the pool the bytes the pass will take to
//      quantize (KvSequence::prepare_pass, KvPool::make_room): a full pool is a
//      keel::CapacityError here, before any row is written, never halfway through the pass;
//   3. run the pass, which stores the rows and grows each sequence;
//   4. when anything failed, forget the appended tokens (set_size(size())), so every sequence
//      keeps the size it had (a linear-attention sequence whose pass failed past a tile boundary
//      goes back to its latest snapshot: KvSequence::set_size) and can run again once there is
//      room.
// prefill and decode_step chunk one sequence the way the scheduler chunks many, which chunk
// invariance is about (docs/engine.md).
//
// Threads: whichever thread owns `model` and the sequences for the call (the engine thread in
// `keel serve`); a Transformer runs one pass at a time, it owns its activation buffers.
#include <atomic>
#include <cstdint>
#include <span>

#include "keel/arch/transformer.h"
#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_sequence.h"

namespace keel {

// One sequence's share of a pass: `tokens` (one role each) run at positions [sequence->size(),
// sequence->size() + tokens.size()); the logits of the token indexes in `logit_rows` go to
// `logits` as (logit_rows.size(), vocab).
struct SequencePass {
  kv::KvSequence* sequence = nullptr;
  std::span<const int32_t> tokens;
  std::span<const chat::Role> roles;
  std::span<const int64_t> logit_rows;
  std::span<float> logits;
};

// One forward pass over `batch` (each sequence at most once, all from one pool), through the
// cycle above. Each segment's logits are what it would get alone (Transformer::forward). When it
// throws, every sequence has forgotten the tokens this call appended (step 4 above).
void run_pass(Transformer& model, std::span<const SequencePass> batch);

// run_pass for one sequence.
void forward_tokens(Transformer& model, kv::KvSequence& sequence, std::span<const int32_t> ids,
                    std::span<const chat::Role> roles, std::span<const int64_t> rows, std::span<float> logits);

struct PrefillResult {
  int64_t prefilled = 0;   // tokens run through the model by this call
  bool cancelled = false;  // stopped before a chunk: `logits` are then not the last token's
};

// Brings the sequence up to all of `ids`: ids and roles are the whole sequence, of which it holds
// the first size() already (a reused prefix, or nothing; at least the last token must be left to
// run). The rest runs in passes of at most `chunk` tokens, with logits only for the last token
// (the output projection is the largest matrix), written to `logits` (vocab floats). A set
// `cancelled` is seen before each chunk: a client that left must not hold the engine for the rest
// of a long prompt. Throws keel::Error on a bad chunk or a sequence that is not a prefix of `ids`.
PrefillResult prefill(Transformer& model, kv::KvSequence& sequence, std::span<const int32_t> ids,
                      std::span<const chat::Role> roles, int64_t chunk, std::span<float> logits,
                      const std::atomic<bool>* cancelled = nullptr);

// Runs one generated token (role assistant) and writes the logits for the next to `logits`.
void decode_step(Transformer& model, kv::KvSequence& sequence, int32_t id, std::span<float> logits);

}  // namespace keel
