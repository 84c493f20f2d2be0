#include "keel/kv/kv_disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "keel/kv/kv_disk_identity.h"
#include "keel/util/error.h"

namespace keel::kv {
namespace {

using FileClock = std::filesystem::file_time_type::clock;

int64_t stamp_of(std::filesystem::file_time_type t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::filesystem::file_time_type time_of(int64_t stamp) {
  return std::filesystem::file_time_type(
      std::chrono::duration_cast<FileClock::duration>(std::chrono::nanoseconds(stamp)));
}

// The whole file, or nothing when it cannot be opened (absent). `too_big`: larger than any block.
std::optional<std::vector<uint8_t>> read_whole(const std::filesystem::path& path, int64_t max_bytes, bool& too_big) {
  too_big = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::vector<uint8_t> bytes;
  if (::fstat(fd, &st) == 0 && st.st_size <= max_bytes) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    bytes.resize(got);  // shorter than stat said: the checksum refuses it
  } else {
    too_big = true;
  }
  ::close(fd);
  return bytes;
}

bool write_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

KvDiskTier::KvDiskTier(const KvDiskOptions& options, uint64_t namespace_key, const KvBlockLayout& layout)
    : root_(options.dir),
      folder_(options.dir / kv_disk_namespace_name(namespace_key)),
      folder_key_(kv_disk_namespace_name(namespace_key) + "/"),
      namespace_(namespace_key),
      layout_(layout),
      cap_(options.max_bytes),
      queue_cap_(options.queue_bytes),
      max_file_bytes_(2 * static_cast<int64_t>(layout.block_bytes(KvFormat::BF16)) + 4096) {
  std::error_code ec;
  // The rows say much about the prompts they came from: a folder keel makes is the owner's alone
  // (0700), as is each file (0600).
  const bool new_root = !std::filesystem::exists(root_, ec);
  std::filesystem::create_directories(folder_, ec);
  if (ec) throw Error("--kv-disk: cannot create " + folder_.string() + ": " + ec.message());
  if (new_root) std::filesystem::permissions(root_, std::filesystem::perms::owner_all, ec);
  std::filesystem::permissions(folder_, std::filesystem::perms::owner_all, ec);
  // Index every namespace's files: the cap is the folder's. Temp files are writes a crash cut short.
  for (auto it = std::filesystem::recursive_directory_iterator(root_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 1) {
      it.disable_recursion_pending();
      continue;
    }
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    const std::filesystem::path& path = it->path();
    const std::string name = path.filename().string();
    if (name.ends_with(".tmp")) {
      std::filesystem::remove(path, file_ec);
      continue;
    }
    if (it.depth() != 1 || !name.ends_with(".kvb")) continue;
    const auto size = static_cast<int64_t>(it->file_size(file_ec));
    const auto mtime = it->last_write_time(file_ec);
    if (file_ec) continue;
    index_locked(path.parent_path().filename().string() + "/" + name, size, stamp_of(mtime));
  }
  if (ec) throw Error("--kv-disk: cannot list " + root_.string() + ": " + ec.message());
  stats_.enabled = true;
  stats_.cap_bytes = cap_;
  evict_to_cap_locked();
  writer_ = std::thread([this] { run_writer(); });
}

KvDiskTier::~KvDiskTier() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  writer_.join();
}

bool KvDiskTier::store(KvDiskBlock block, Queue queue) {
  const std::string name = kv_disk_file_name(block.id.hash, block.id.check);
  const int64_t bytes = block.row_bytes();
  MutexLock lock(mu_);
  if (queue == Queue::IfRoom && queue_bytes_ > 0 && queue_bytes_ + bytes > queue_cap_) {
    ++stats_.dropped;
    return false;
  }
  auto shared = std::make_shared<const KvDiskBlock>(std::move(block));
  pending_[name] = shared;
  queue_.emplace_back(name, std::move(shared));
  queue_bytes_ += bytes;
  lock.unlock();
  changed_.notify_all();
  return true;
}

bool KvDiskTier::room_for_copy(int64_t bytes) {
  MutexLock lock(mu_);
  if (queue_bytes_ == 0 || queue_bytes_ + bytes <= queue_cap_) return true;
  ++stats_.dropped;
  return false;
}

std::optional<KvDiskBlock> KvDiskTier::load(const KvDiskBlockId& id) {
  const std::string name = kv_disk_file_name(id.hash, id.check);
  {
    MutexLock lock(mu_);
    if (auto it = pending_.find(name); it != pending_.end() && it->second->id == id) {
      ++stats_.hits;
      stats_.hit_bytes += it->second->row_bytes();
      return *it->second;  // a copy: the writer still needs it
    }
  }
  const std::filesystem::path path = folder_ / name;
  bool too_big = false;
  const std::optional<std::vector<uint8_t>> file = read_whole(path, max_file_bytes_, too_big);
  if (!file) {
    MutexLock lock(mu_);
    ++stats_.misses;
    unindex_locked(folder_key_ + name);  // removed behind our back: contains() says so from now on
    return std::nullopt;
  }
  KvDiskBlock block;
  const KvDiskDecode result = too_big ? KvDiskDecode::Corrupt : kv_disk_decode(*file, namespace_, id, layout_, block);
  if (result != KvDiskDecode::Ok) {
    refuse(path, folder_key_ + name, result);
    return std::nullopt;
  }
  int64_t stamp;
  {
    MutexLock lock(mu_);
    ++stats_.hits;
    stats_.hit_bytes += block.row_bytes();
    stamp = next_stamp_locked();
    index_locked(folder_key_ + name, static_cast<int64_t>(file->size()), stamp);
  }
  std::error_code ec;
  std::filesystem::last_write_time(path, time_of(stamp), ec);  // the use order a restart reads back
  return block;
}

void KvDiskTier::refuse(const std::filesystem::path& path, const std::string& key, KvDiskDecode why) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  MutexLock lock(mu_);
  ++(why == KvDiskDecode::Mismatched ? stats_.mismatched : stats_.corrupt);
  unindex_locked(key);
}

bool KvDiskTier::contains(uint64_t hash, uint64_t check) const {
  const std::string name = kv_disk_file_name(hash, check);
  MutexLock lock(mu_);
  return pending_.contains(name) || files_.contains(folder_key_ + name);
}

void KvDiskTier::flush() {
  MutexLock lock(mu_);
  changed_.wait(lock, [&]() KEEL_REQUIRES(mu_) { return queue_.empty() && writing_ == 0; });
}

KvDiskStats KvDiskTier::stats() const {
  MutexLock lock(mu_);
  KvDiskStats s = stats_;
  s.files = static_cast<int64_t>(files_.size());
  s.pending = static_cast<int64_t>(queue_.size()) + writing_;
  s.pending_bytes = queue_bytes_;
  return s;
}

void KvDiskTier::run_writer() {
  MutexLock lock(mu_);
  while (true) {
    changed_.wait(lock, [&]() KEEL_REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and everything is written
    auto [name, block] = std::move(queue_.front());
    queue_.pop_front();
    ++writing_;
    lock.unlock();
    write_file(name, *block);
    lock.lock();
    --writing_;
    queue_bytes_ -= block->row_bytes();
    if (auto it = pending_.find(name); it != pending_.end() && it->second == block) pending_.erase(it);
    changed_.notify_all();
  }
}

void KvDiskTier::write_file(const std::string& name, const KvDiskBlock& block) {
  const std::vector<uint8_t> bytes = kv_disk_encode(block, namespace_);
  const std::filesystem::path path = folder_ / name;
  const std::filesystem::path temp = folder_ / ("." + name + ".tmp");
  // Temp file and rename: a reader sees the old file, the new one, or none, never a part. No
  // fsync: after a power cut a renamed file may hold garbage, which its checksum refuses.
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && write_all(fd, bytes);
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  if (ok) ok = ::rename(temp.c_str(), path.c_str()) == 0;
  MutexLock lock(mu_);
  if (!ok) {
    std::error_code ec;
    std::filesystem::remove(temp, ec);
    if (stats_.write_errors++ == 0)
      std::fprintf(stderr, "keel: --kv-disk: cannot write %s: %s (blocks are recomputed instead)\n", path.c_str(),
                   std::strerror(errno));
    return;
  }
  ++stats_.writes;
  stats_.write_bytes += static_cast<int64_t>(bytes.size());
  const int64_t stamp = next_stamp_locked();
  index_locked(folder_key_ + name, static_cast<int64_t>(bytes.size()), stamp);
  // The file's mtime is its stamp, to the nanosecond (the kernel's own is coarser): a restart
  // reads back the same order.
  std::error_code ec;
  std::filesystem::last_write_time(path, time_of(stamp), ec);
  evict_to_cap_locked();
}

int64_t KvDiskTier::next_stamp_locked() {
  last_stamp_ = std::max(last_stamp_ + 1, stamp_of(FileClock::now()));
  return last_stamp_;
}

void KvDiskTier::index_locked(const std::string& key, int64_t bytes, int64_t stamp) {
  unindex_locked(key);
  files_[key] = Entry{bytes, stamp};
  lru_.insert({stamp, key});
  stats_.bytes += bytes;
  last_stamp_ = std::max(last_stamp_, stamp);
}

void KvDiskTier::unindex_locked(const std::string& key) {
  auto it = files_.find(key);
  if (it == files_.end()) return;
  lru_.erase({it->second.stamp, key});
  stats_.bytes -= it->second.bytes;
  files_.erase(it);
}

void KvDiskTier::evict_to_cap_locked() {
  while (stats_.bytes > cap_ && !lru_.empty()) {
    const std::string key = lru_.begin()->second;
    std::error_code ec;
    std::filesystem::remove(root_ / key, ec);  // an unlink: no data is read or written
    unindex_locked(key);
    ++stats_.evictions;
  }
}

}  // namespace keel::kv
