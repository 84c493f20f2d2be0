// Fuzz target: the safetensors header parser must reject any malformed input with keel::Error and
// never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <span>

#include "keel/model/safetensors.h"
#include "keel/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto h = keel::parse_safetensors_header(std::span<const uint8_t>(data, size), size, "fuzz");
    for (const auto& t : h.tensors) (void)t.element_count();
  } catch (const keel::Error&) {
  }
  return 0;
}
