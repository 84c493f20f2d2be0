// test::GuardedBytes, which the kernel tests' weights live in: the byte after the last one is
// unreadable (so a kernel's over-read faults), every byte up to it is readable and writable, and a
// copy is a buffer of its own with its own guard.
#include <gtest/gtest.h>

#include <cstdint>

#include "guarded_bytes_support.h"

namespace {

uint8_t read_byte(const volatile uint8_t* p) { return *p; }

TEST(TestGuardedBytes, EveryByteIsUsableAndTheNextFaults) {
  for (size_t size : {size_t{1}, size_t{17}, size_t{4096}, size_t{4097}, size_t{70000}}) {
    keel::test::GuardedBytes bytes(size);
    ASSERT_EQ(bytes.size(), size);
    for (size_t i = 0; i < size; ++i) {
      ASSERT_EQ(bytes[i], 0) << i;
      bytes[i] = static_cast<uint8_t>(i);
    }
    keel::test::GuardedBytes copy = bytes;
    ASSERT_NE(copy.data(), bytes.data());
    for (size_t i = 0; i < size; ++i) ASSERT_EQ(copy[i], static_cast<uint8_t>(i)) << i;
    EXPECT_DEATH(read_byte(bytes.data() + size), "") << size;
    EXPECT_DEATH(read_byte(copy.data() + size), "") << size;
  }
}

}  // namespace
