#include "guarded_bytes_support.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <utility>

namespace keel::test {

GuardedBytes::GuardedBytes(size_t size) : size_(size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t readable = (size + page - 1) / page * page;
  map_bytes_ = readable + page;
  map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) throw std::runtime_error("GuardedBytes: mmap failed");
  uint8_t* base = static_cast<uint8_t*>(map_);
  if (mprotect(base + readable, page, PROT_NONE) != 0) {
    munmap(map_, map_bytes_);
    throw std::runtime_error("GuardedBytes: mprotect failed");
  }
  data_ = base + readable - size;  // the end, not the start, is what an over-read crosses
}

GuardedBytes::GuardedBytes(GuardedBytes&& other) noexcept
    : map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

GuardedBytes::GuardedBytes(const GuardedBytes& other) : GuardedBytes(other.size_) {
  if (size_) std::memcpy(data_, other.data_, size_);
}

GuardedBytes& GuardedBytes::operator=(GuardedBytes other) noexcept {
  std::swap(map_, other.map_);
  std::swap(map_bytes_, other.map_bytes_);
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  return *this;
}

GuardedBytes::~GuardedBytes() {
  if (map_) munmap(map_, map_bytes_);
}

}  // namespace keel::test
