#pragma once
// A served model folder from `keel synth` for the protocol tests of a family (gpt-oss, Gemma 4,
// Qwen3-Next): random weights of the family's shape beside a real tokenizer and chat template.
#include <filesystem>

#include <nlohmann/json.hpp>

namespace keel::test {

// Writes `config` to work/config.json, synthesizes its weights into `out`, and puts beside them
// the tokenizer.json at `tokenizer_json`, `tokenizer_config` and `generation_config`. Returns `out`.
std::filesystem::path write_synth_folder(const std::filesystem::path& work, const std::filesystem::path& out,
                                         const nlohmann::ordered_json& config, const std::filesystem::path& tokenizer_json,
                                         const nlohmann::ordered_json& tokenizer_config,
                                         const nlohmann::ordered_json& generation_config);

}  // namespace keel::test
