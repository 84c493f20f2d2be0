#include <gtest/gtest.h>
#include "keel/model/safetensors.h"
#include "test_support.h"
TEST(Safetensors, ReadsRealHeader) {
  auto h = keel::read_safetensors_header(keel::test::shared_dir() / "models/tiny-toolcaller/model.safetensors");
  EXPECT_GT(h.tensors.size(), 10u);
}
