#pragma once
// The GGUF metadata keys of a model's shape, as llama.cpp names them ("{arch}.embedding_length"
// ...), in one table for the writer (`keel synth` to .gguf, arch/synth.cpp) and the reader
// (arch/gguf_model.cpp), so the two cannot drift apart. Constants only; any thread.
#include <cstdint>
#include <string>
#include <string_view>

namespace keel::arch::gguf_keys {

inline constexpr std::string_view kArchitecture = "general.architecture";
inline constexpr std::string_view kName = "general.name";
inline constexpr std::string_view kFileType = "general.file_type";
inline constexpr std::string_view kAlignment = "general.alignment";

// Suffixes after "{arch}.".
inline constexpr std::string_view kContextLength = "context_length";
inline constexpr std::string_view kEmbeddingLength = "embedding_length";
inline constexpr std::string_view kBlockCount = "block_count";
inline constexpr std::string_view kFeedForwardLength = "feed_forward_length";
inline constexpr std::string_view kVocabSize = "vocab_size";
inline constexpr std::string_view kHeadCount = "attention.head_count";
inline constexpr std::string_view kHeadCountKv = "attention.head_count_kv";
inline constexpr std::string_view kKeyLength = "attention.key_length";
inline constexpr std::string_view kValueLength = "attention.value_length";
inline constexpr std::string_view kRmsEpsilon = "attention.layer_norm_rms_epsilon";
inline constexpr std::string_view kSlidingWindow = "attention.sliding_window";
inline constexpr std::string_view kSlidingWindowPattern = "attention.sliding_window_pattern";
inline constexpr std::string_view kRopeFreqBase = "rope.freq_base";
inline constexpr std::string_view kRopeDimensionCount = "rope.dimension_count";
inline constexpr std::string_view kRopeScalingType = "rope.scaling.type";
inline constexpr std::string_view kRopeScalingFactor = "rope.scaling.factor";
inline constexpr std::string_view kRopeScaleLinear = "rope.scale_linear";  // the older key
inline constexpr std::string_view kRopeScalingOriginalContext = "rope.scaling.original_context_length";
inline constexpr std::string_view kRopeScalingYarnBetaFast = "rope.scaling.yarn_beta_fast";
inline constexpr std::string_view kRopeScalingYarnBetaSlow = "rope.scaling.yarn_beta_slow";
inline constexpr std::string_view kExpertCount = "expert_count";
inline constexpr std::string_view kExpertUsedCount = "expert_used_count";
inline constexpr std::string_view kExpertFeedForwardLength = "expert_feed_forward_length";
inline constexpr std::string_view kExpertWeightsNorm = "expert_weights_norm";

// "{arch}.{suffix}".
inline std::string key(std::string_view arch, std::string_view suffix) {
  return std::string(arch) + "." + std::string(suffix);
}

// llama_ftype values for general.file_type.
inline constexpr uint32_t kFileTypeF32 = 0, kFileTypeF16 = 1, kFileTypeBF16 = 32;

}  // namespace keel::arch::gguf_keys
