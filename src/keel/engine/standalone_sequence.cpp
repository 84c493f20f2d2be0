#include "keel/engine/standalone_sequence.h"

#include <string>
#include <utility>

#include "keel/kv/kv_block_layout.h"
#include "keel/kv/kv_window.h"
#include "keel/util/error.h"

namespace keel {

int64_t StandaloneSequence::budget_bytes(const ModelSpec& spec, int64_t context) {
  if (context < 1) throw Error("the context must hold at least one token, not " + std::to_string(context));
  // Every block whole at bf16 in every layer group, sliding ones included (they only free rows).
  const auto block = static_cast<int64_t>(kv::KvBlockLayout(spec).block_bytes(KvFormat::BF16));
  return 2 * block * kv::blocks_for_tokens(context);
}

StandaloneSequence::StandaloneSequence(const ModelSpec& spec, int64_t context, kv::KvPolicy policy, bool rotate)
    : pool_(spec, budget_bytes(spec, context), std::move(policy), rotate, context),
      sequence_(pool_.open({}, {})) {}  // nothing is cached yet: an empty sequence

}  // namespace keel
