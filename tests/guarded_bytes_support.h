#pragma once
// Bytes that end where an unmapped page begins, for the kernel tests' weights: a kernel that reads
// past its rows faults (SIGSEGV) instead of reading whatever lies beyond. The sanitized build does
// not instrument the per-target SIMD kernels (CMakeLists.txt), so this is what catches their
// over-reads, on every target and in every build. Owned by one test; any thread may read.
#include <cstddef>
#include <cstdint>

namespace keel::test {

class GuardedBytes {
 public:
  explicit GuardedBytes(size_t size);  // zeroed; the last byte sits just before the guard page
  GuardedBytes(const GuardedBytes& other);  // a copy has a guard page of its own
  GuardedBytes(GuardedBytes&& other) noexcept;
  GuardedBytes& operator=(GuardedBytes other) noexcept;
  ~GuardedBytes();

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  uint8_t& operator[](size_t i) { return data_[i]; }
  uint8_t* begin() { return data_; }
  uint8_t* end() { return data_ + size_; }

 private:
  void* map_ = nullptr;  // the readable pages and the guard page after them
  size_t map_bytes_ = 0;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace keel::test
