// keel synth: a random-weight model folder with a real config's exact shapes, for benchmarks.
#include <climits>
#include <cstdio>
#include <filesystem>

#include "args.h"
#include "commands.h"
#include "keel/arch/synth.h"
#include "keel/util/error.h"

namespace keel::cli {

int synth_command(const CommandArgs& argv) {
  Args args(argv, {"config", "dtype", "out", "seed", "group-size", "layers"});
  std::filesystem::path config = args.require("config");
  if (std::filesystem::is_directory(config)) config /= "config.json";
  const std::string dtype = args.get_or("dtype", "bf16");
  SynthOptions o;
  if (dtype == "bf16") o.format = WeightFormat::BF16;
  else if (dtype == "f16") o.format = WeightFormat::F16;
  else if (dtype == "f32") o.format = WeightFormat::F32;
  else if (dtype == "mlx4") o.format = WeightFormat::MLX4;
  else if (dtype == "mlx8") o.format = WeightFormat::MLX8;
  else throw Error("--dtype must be bf16, f16, f32, mlx4 or mlx8, got '" + dtype + "'");
  o.mlx_group_size = static_cast<int>(args.get_int("group-size", 64, 32, 128));
  if (o.mlx_group_size != 32 && o.mlx_group_size != 64 && o.mlx_group_size != 128)
    throw Error("--group-size must be 32, 64 or 128");
  o.seed = static_cast<uint64_t>(args.get_int("seed", 1, 0, LONG_MAX));
  o.layers = args.get_int("layers", 0, 0, 100000);  // 0: all of the config's layers
  const std::filesystem::path out = args.require("out");
  const uint64_t bytes = synthesize_model(config, out, o);
  std::fprintf(stderr, "keel: wrote %s (%s, %.1f MB of weights)\n", out.string().c_str(), dtype.c_str(),
               static_cast<double>(bytes) / 1e6);
  return 0;
}

}  // namespace keel::cli
