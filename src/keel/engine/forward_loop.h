#pragma once
// The one loop that runs the model over a paged KV sequence (keel/kv/kv_sequence.h): a forward
// pass over tokens and their roles, the chunked prefill of a prompt, and one decode step, for one
// sequence at a time: `keel run`'s raw generation, `keel bench`, eval's fidelity runs and the
// golden tests. Chat turns do not come through here: the scheduler batches several sequences in
// one pass (engine/scheduler.h, Turn::prepare_pass). Both keep the sequence protocol
// (append_tokens() before each pass, forget the appended tokens when a pass fails) and chunk
// sequences the same way, which chunk invariance is about (docs/engine.md).
//
// Threads: whichever thread owns `model` and `sequence` for the call (the engine thread in
// `keel serve`); a Transformer runs one pass at a time, it owns its activation buffers.
#include <atomic>
#include <cstdint>
#include <span>

#include "keel/arch/transformer.h"
#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_sequence.h"

namespace keel {

// Runs `ids` (one role each) at positions [sequence.size(), sequence.size() + ids.size()) and
// writes the logits of the token indexes in `rows` to `logits` as (rows.size(), vocab). What the
// pass needs is taken from the pool before it (KvSequence::prepare_pass_alone: a full pool is a
// CapacityError there, never halfway). When it throws, the sequence forgets the appended tokens
// and keeps its size, so it can go on.
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
