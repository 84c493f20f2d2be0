#pragma once
// A read-only memory mapping of a whole file. Model weights are used straight from the mapping
// (zero-copy); the kernel pages them in on demand and may share them between processes.
// Immutable after construction: bytes() and path() may be called from many threads at once. The object
// owns the mapping (not copyable): the span bytes() returns is valid until the object is destroyed.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace keel {

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws keel::Error naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Tells the kernel that these bytes of the mapping will not be read again (ones outside it are
  // ignored): the whole pages among them leave this process's memory. Read again, they would come
  // back from the file, so nothing is lost. For bytes copied elsewhere at load.
  void release(std::span<const uint8_t> bytes) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace keel
