#pragma once
// llama.cpp's tokenizer test vectors (fixtures/tokenizer_vectors/ggml-vocab-*.gguf.{inp,out}):
// texts separated by "\n__ggml_vocab_test__\n" (one after the last text too), and one line of
// space-separated ids per text.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace keel::test {

struct VocabVector {
  std::string text;
  std::vector<int32_t> ids;
};

// `stem` is the path without ".inp"/".out" (".../ggml-vocab-qwen2.gguf"). Adds a test failure
// when the .out file has fewer lines than the .inp file has texts.
std::vector<VocabVector> read_ggml_vectors(const std::filesystem::path& stem);

}  // namespace keel::test
