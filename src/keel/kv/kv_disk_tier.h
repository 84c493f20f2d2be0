#pragma once
// The KV pool's disk tier: prefix-cache blocks as content-addressed files, so a restart (or a
// block the RAM budget evicted) is a cache hit instead of a prefill. See docs/kv-cache.md,
// "Disk tier".
//
// Layout: DIR/<namespace>/<hash><check>.kvb, one file per block (kv_disk_block.h), where the
// namespace (kv_disk_namespace) covers the model's identity, the pool's layout, policy and
// rotation, so another model, policy or rotation never even opens this one's files. Each file is
// written to a temp file and renamed into place, and carries a checksum; a file that is short,
// corrupt or of another block is refused, removed and counted, and its block recomputed.
//
// The whole folder (every namespace) stays under the cap: after each write the least recently
// used files go first. Use order is kept across restarts by the files' mtimes (set on every read).
// One keel process per folder (two would each evict by their own index; files stay valid).
//
// Threads: store(), load(), flush() and stats() from any thread (one mutex, never held during
// file I/O). Writes happen on the tier's own writer thread, so store() never waits for the disk
// unless asked to; load() reads on the caller's thread.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "keel/kv/kv_block_layout.h"
#include "keel/kv/kv_disk_block.h"
#include "keel/kv/kv_disk_stats.h"
#include "keel/util/thread_annotations.h"

namespace keel::kv {

struct KvDiskOptions {
  std::filesystem::path dir;          // empty: no disk tier
  int64_t max_bytes = int64_t{8} << 30;  // the folder's cap (--kv-disk-gb)
  uint64_t model_identity = 0;        // kv_model_identity(the model's files)
  // Copies of published blocks waiting for the writer, at most (RAM besides the pool's budget); a
  // block that finds the queue full is not written when published, only when RAM evicts it.
  int64_t queue_bytes = int64_t{256} << 20;
  bool enabled() const { return !dir.empty(); }
};

class KvDiskTier {
 public:
  // Creates DIR/<namespace>/, indexes every block file under DIR and removes temp files a crash
  // left behind, then evicts down to the cap. Throws keel::Error when DIR cannot be created or
  // listed.
  KvDiskTier(const KvDiskOptions& options, uint64_t namespace_key, const KvBlockLayout& layout);
  // Writes everything still queued, then stops the writer.
  ~KvDiskTier();
  KvDiskTier(const KvDiskTier&) = delete;
  KvDiskTier& operator=(const KvDiskTier&) = delete;

  enum class Queue {
    IfRoom,  // a copy (a block just published): refused, counted in `dropped`, when the queue is full
    Always,  // rows moved out of RAM (an evicted block): queued whatever the queue holds, since
             // their memory left the budget as they came; the pool's eviction rate bounds it
  };
  // Queues the block for the writer thread; false when refused.
  bool store(KvDiskBlock block, Queue queue);
  // Whether a copy of `bytes` would be queued now (Queue::IfRoom); counts a refusal in `dropped`,
  // so the caller need not copy a block only to see it refused.
  bool room_for_copy(int64_t bytes);
  // The block `id` names, checked byte for byte: from the write queue, else from its file. Nothing
  // when there is no such file or it was refused (then it is removed and counted).
  std::optional<KvDiskBlock> load(const KvDiskBlockId& id);
  // Whether the folder has the block's file, or the writer has it queued (the index, no I/O).
  bool contains(uint64_t hash, uint64_t check) const;
  // Returns once every block queued so far is written (or failed).
  void flush();
  KvDiskStats stats() const;
  const std::filesystem::path& folder() const { return folder_; }
  uint64_t namespace_key() const { return namespace_; }

 private:
  struct Entry {
    int64_t bytes = 0;
    int64_t stamp = 0;  // last use, ns since the file clock's epoch (the file's mtime)
  };
  using Pending = std::shared_ptr<const KvDiskBlock>;

  void run_writer();
  void write_file(const std::string& name, const KvDiskBlock& block);
  // Under mu_.
  int64_t next_stamp_locked() KEEL_REQUIRES(mu_);
  void index_locked(const std::string& key, int64_t bytes, int64_t stamp) KEEL_REQUIRES(mu_);
  void unindex_locked(const std::string& key) KEEL_REQUIRES(mu_);
  void evict_to_cap_locked() KEEL_REQUIRES(mu_);
  void refuse(const std::filesystem::path& path, const std::string& key, KvDiskDecode why);

  const std::filesystem::path root_;
  const std::filesystem::path folder_;
  const std::string folder_key_;  // "<namespace>/": index keys are paths relative to root_
  const uint64_t namespace_;
  const KvBlockLayout& layout_;
  const int64_t cap_;
  const int64_t queue_cap_;
  const int64_t max_file_bytes_;

  mutable Mutex mu_;
  std::condition_variable_any changed_;
  std::deque<std::pair<std::string, Pending>> queue_ KEEL_GUARDED_BY(mu_);  // names to write, oldest first
  std::unordered_map<std::string, Pending> pending_ KEEL_GUARDED_BY(mu_);   // queued or being written, by name
  int64_t queue_bytes_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t writing_ KEEL_GUARDED_BY(mu_) = 0;  // jobs taken by the writer and not yet done
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  std::unordered_map<std::string, Entry> files_ KEEL_GUARDED_BY(mu_);
  std::set<std::pair<int64_t, std::string>> lru_ KEEL_GUARDED_BY(mu_);  // (stamp, key), oldest first
  int64_t last_stamp_ KEEL_GUARDED_BY(mu_) = 0;
  KvDiskStats stats_ KEEL_GUARDED_BY(mu_);

  std::thread writer_;  // last: starts once everything above exists
};

}  // namespace keel::kv
