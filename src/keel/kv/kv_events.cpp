#include "keel/kv/kv_events.h"

#include <algorithm>

namespace keel::kv {

void KvEventLog::push(KvBlockEvent e) {
  e.seq = next_seq_++;
  events_.push_back(e);
  if (events_.size() > capacity_) events_.pop_front();
}

std::optional<std::vector<KvBlockEvent>> KvEventLog::since(uint64_t after, size_t limit) const {
  // Ahead of the log: the reader followed an earlier process on this port.
  if (after > last_seq()) return std::nullopt;
  const uint64_t oldest = events_.empty() ? next_seq_ : events_.front().seq;
  if (after + 1 < oldest) return std::nullopt;
  const auto first = events_.begin() + static_cast<std::ptrdiff_t>(after + 1 - oldest);
  const auto count = std::min<size_t>(limit, static_cast<size_t>(events_.end() - first));
  return std::vector<KvBlockEvent>(first, first + static_cast<std::ptrdiff_t>(count));
}

}  // namespace keel::kv
