#include "keel/text/merge_table.h"

namespace keel::text {

void MergeTable::reserve(size_t count) {
  size_t capacity = 16;
  while (capacity < count * 2) capacity *= 2;  // keep the load factor at or under one half
  if (capacity <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  shift_ = 64;
  for (size_t c = capacity; c > 1; c >>= 1) --shift_;
  size_ = 0;
  for (const auto& s : old)
    if (s.key != kEmpty)
      insert_or_assign(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xFFFFFFFF), s.merge);
}

void MergeTable::grow() { reserve(slots_.empty() ? 8 : slots_.size()); }

void MergeTable::insert_or_assign(int32_t left, int32_t right, Merge merge) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  uint64_t key = key_of(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
    if (slots_[i].key == key) {
      slots_[i].merge = merge;
      return;
    }
    if (slots_[i].key == kEmpty) {
      slots_[i] = {key, merge};
      ++size_;
      return;
    }
  }
}

std::optional<MergeTable::Merge> MergeTable::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return std::nullopt;
  uint64_t key = key_of(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
    if (slots_[i].key == key) return slots_[i].merge;
    if (slots_[i].key == kEmpty) return std::nullopt;
  }
}

}  // namespace keel::text
