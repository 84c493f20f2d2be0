#include <gtest/gtest.h>
#include <cstdlib>
#include "scripted_model_support.h"
namespace keel::test {
TEST(ZzScratch, Write) {
  TempDir tmp;
  auto m = write_scripted_model(tmp, std::getenv("FIRST"), "Done");
  std::filesystem::remove_all("/tmp/scripted");
  std::filesystem::copy(m, "/tmp/scripted", std::filesystem::copy_options::recursive);
}
}
