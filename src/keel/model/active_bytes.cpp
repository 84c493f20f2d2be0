#include "keel/model/active_bytes.h"

namespace keel {

DecodeWeightBytes decode_weight_bytes(const WeightBytesByUse& p) {
  DecodeWeightBytes d;
  d.resident = p.embedding + p.output_head + p.every_token + p.not_decoded;
  d.active = p.every_token + p.output_head;
  // Tied: the head multiplies by the whole table, the token's row included. Untied: the lookup
  // reads the one row (a few KiB), so the table's size never counts as traffic.
  d.active += p.tied_head ? p.embedding : (p.vocab_size > 0 ? p.embedding / static_cast<uint64_t>(p.vocab_size) : 0);
  for (const RoutedExpertBytes& r : p.routed) {
    d.resident += r.bytes;
    // Experts of one layer share a shape and format, so one expert is an exact share of the layer.
    if (r.experts > 0) d.active += r.bytes / static_cast<uint64_t>(r.experts) * static_cast<uint64_t>(r.experts_per_token);
  }
  return d;
}

}  // namespace keel
