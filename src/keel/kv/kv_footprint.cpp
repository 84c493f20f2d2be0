#include "keel/kv/kv_footprint.h"

#include <algorithm>
#include <vector>

#include "keel/kv/kv_block_layout.h"
#include "keel/kv/kv_window.h"
#include "keel/util/error.h"

namespace keel::kv {

int64_t kv_sequence_bytes(const ModelSpec& spec, const KvPolicy& policy, std::span<const chat::Role> roles) {
  const auto n = static_cast<int64_t>(roles.size());
  if (n == 0) return 0;
  const KvBlockLayout layout(spec);
  // Blocks out of the last window are quantized; those a branch inside the window could still
  // read at full precision keep both forms; the window itself is full precision only.
  const int64_t window = window_start_block(n - 1, policy.recent());
  const int64_t full_from = full_rows_kept_from(n, policy.recent());
  int64_t bytes = 0;
  for (int64_t b = 0; b < blocks_for_tokens(n); ++b) {
    const int64_t first = b * kKvBlockTokens;
    const auto count = static_cast<size_t>(std::min(kKvBlockTokens, n - first));
    const KvFormat format = policy.block_format(roles.subspan(static_cast<size_t>(first), count), first);
    const bool quantized = b < window && format != KvFormat::BF16;
    const bool full = !quantized || b >= full_from;
    if (quantized) bytes += static_cast<int64_t>(layout.block_bytes(format));
    if (full) bytes += static_cast<int64_t>(layout.block_bytes(KvFormat::BF16));
  }
  return bytes;
}

double kv_bytes_per_token(const ModelSpec& spec, const KvPolicy& policy, int64_t tokens, chat::Role role) {
  if (tokens <= 0) throw Error("KV bytes per token needs a positive token count");
  const std::vector<chat::Role> roles(static_cast<size_t>(tokens), role);
  return static_cast<double>(kv_sequence_bytes(spec, policy, roles)) / static_cast<double>(tokens);
}

}  // namespace keel::kv
