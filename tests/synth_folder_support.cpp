#include "synth_folder_support.h"

#include <fstream>

#include "keel/arch/synth.h"

namespace keel::test {

std::filesystem::path write_synth_folder(const std::filesystem::path& work, const std::filesystem::path& out,
                                         const nlohmann::ordered_json& config, const std::filesystem::path& tokenizer_json,
                                         const nlohmann::ordered_json& tokenizer_config,
                                         const nlohmann::ordered_json& generation_config) {
  const std::filesystem::path config_in = work / "config.json";
  std::ofstream(config_in) << config.dump(2);
  synthesize_model(config_in, out, SynthOptions{});
  std::filesystem::copy_file(tokenizer_json, out / "tokenizer.json");
  std::ofstream(out / "tokenizer_config.json") << tokenizer_config.dump(2);
  std::ofstream(out / "generation_config.json") << generation_config.dump(2);
  return out;
}

}  // namespace keel::test
