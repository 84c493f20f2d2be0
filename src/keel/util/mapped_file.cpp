#include "keel/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "keel/util/error.h"

namespace keel {

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path.string() + ": not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error(path.string() + ": cannot map: " + std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::release(std::span<const uint8_t> bytes) const {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto mapped = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t from = std::max(reinterpret_cast<uintptr_t>(bytes.data()), mapped);
  const uintptr_t to = std::min(reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size(), mapped + size_);
  const uintptr_t first = (from + page - 1) / page * page, end = to / page * page;
  if (end > first) ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);  // advice: failure is harmless
}

}  // namespace keel
