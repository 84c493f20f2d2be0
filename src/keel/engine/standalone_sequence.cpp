#include "keel/engine/standalone_sequence.h"

#include <string>
#include <utility>

#include "keel/kv/kv_block_layout.h"
#include "keel/kv/kv_pool.h"
#include "keel/kv/kv_window.h"
#include "keel/util/error.h"

namespace keel {

int64_t StandaloneSequence::budget_bytes(const ModelSpec& spec, int64_t context) {
  if (context < 1) throw Error("the context must hold at least one token, not " + std::to_string(context));
  // Every block whole at bf16 in every layer group, sliding ones included (they only free rows),
  // and a linear-attention model's state: live for two sequences (a second one reusing the first's
  // prefix), and the snapshots: the interval ones, the preamble's end, the latest two and a branch point.
  const kv::KvBlockLayout layout(spec);
  const auto block = static_cast<int64_t>(layout.block_bytes(KvFormat::BF16));
  const int64_t blocks = kv::blocks_for_tokens(context);
  return 2 * block * blocks + 2 * layout.linear().live_bytes() +
         layout.linear().snapshot_bytes() * (4 + blocks / kv::kDefaultStateInterval);
}

StandaloneSequence::StandaloneSequence(const ModelSpec& spec, int64_t context, kv::KvPolicy policy, bool rotate)
    : pool_(spec, budget_bytes(spec, context), std::move(policy), rotate, context),
      sequence_(pool_.open({}, {})) {}  // nothing is cached yet: an empty sequence

}  // namespace keel
