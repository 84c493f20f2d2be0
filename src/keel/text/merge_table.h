#pragma once
// The BPE merge lookup: (left id, right id) -> (rank, merged id). It is probed for every adjacent
// pair of every word, so it is a flat open-addressing table (one cache line per probe, usually)
// instead of a node-based std::unordered_map.
// Threads: filled (reserve, insert_or_assign) by one thread while the tokenizer loads; after that find()
// is const and may be called from many threads at once.
#include <cstdint>
#include <optional>
#include <vector>

namespace keel::text {

class MergeTable {
 public:
  struct Merge {
    uint32_t rank;
    int32_t result;
  };

  void reserve(size_t count);
  // A pair already present takes the new value (a later line in the file wins, as in Hugging Face).
  void insert_or_assign(int32_t left, int32_t right, Merge merge);
  std::optional<Merge> find(int32_t left, int32_t right) const;

 private:
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative, so never a real key

  static uint64_t key_of(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  // Fibonacci hashing: the top bits of the product are the well-mixed ones.
  size_t slot_of(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void grow();

  std::vector<Slot> slots_;
  size_t size_ = 0;
  int shift_ = 64;  // 64 - log2(slots_.size())
};

}  // namespace keel::text
