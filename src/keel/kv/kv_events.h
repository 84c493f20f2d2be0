#pragma once
// What the prefix cache gained and lost, for a router outside the process (docs/deploy.md): each
// block published to the cache is a Stored event and each evicted one a Removed event, named by
// its chain hash (kv_block_hash.h). The hash covers the tokens, their roles' formats, the policy
// and the cache salt, so the same prefix has the same hash on every replica that serves the same
// model with the same policy: a router that knows which hashes a replica holds knows how much of a
// new request's prompt that replica would reuse.
//
// Owned by KvPool and written under its lock; not thread-safe on its own.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace keel::kv {

struct KvBlockEvent {
  enum class Kind { Stored, Removed };
  uint64_t seq = 0;  // 1, 2, ... in the order the pool changed
  Kind kind = Kind::Stored;
  uint64_t hash = 0;
  uint64_t parent = 0;  // Stored: the previous block's hash, or the chain's salted root for a first block
};

class KvEventLog {
 public:
  // Keeps the newest `capacity` events; a reader further behind must start over from a snapshot.
  explicit KvEventLog(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  void stored(uint64_t hash, uint64_t parent) { push({0, KvBlockEvent::Kind::Stored, hash, parent}); }
  void removed(uint64_t hash) { push({0, KvBlockEvent::Kind::Removed, hash, 0}); }

  uint64_t last_seq() const { return next_seq_ - 1; }
  // The events after `after` (at most `limit`, oldest first), or nothing when some of them were
  // already dropped or `after` is past the last one (the reader followed another process): either
  // way the reader must take a new snapshot.
  std::optional<std::vector<KvBlockEvent>> since(uint64_t after, size_t limit) const;

  static constexpr size_t kDefaultCapacity = 1 << 16;

 private:
  void push(KvBlockEvent e);

  size_t capacity_;
  std::deque<KvBlockEvent> events_;
  uint64_t next_seq_ = 1;
};

}  // namespace keel::kv
