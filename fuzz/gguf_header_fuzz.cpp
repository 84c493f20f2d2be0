// Fuzz target: the GGUF header parser must reject any malformed input with keel::Error and never
// crash, hang, read out of bounds or allocate what the input cannot back.
#include <cstddef>
#include <cstdint>
#include <span>

#include "keel/model/gguf_file.h"
#include "keel/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto h = keel::gguf::parse_header(std::span<const uint8_t>(data, size), "fuzz");
    for (const auto& t : h.tensors) (void)(t.elements() + static_cast<int64_t>(t.shape().size()));
    for (const auto& [key, value] : h.metadata) (void)value.array_size();
  } catch (const keel::Error&) {
  }
  return 0;
}
