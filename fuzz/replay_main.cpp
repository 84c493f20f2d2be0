// Replay driver for fuzz targets in builds without libFuzzer (g++): feeds every file of the seed
// corpus, then a fixed number of deterministic mutations of each (bit flips, truncations, byte
// insertions), so the test suite exercises each target on every build. A crash or sanitizer
// report fails the test; clean runs print how many inputs were tried.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
void run(const std::vector<uint8_t>& input) { LLVMFuzzerTestOneInput(input.data(), input.size()); }
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::vector<uint8_t>> seeds;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p(argv[i]);
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  seeds.push_back({});

  std::mt19937 rng(12345);
  size_t tried = 0;
  constexpr int kMutationsPerSeed = 2000;
  for (const auto& seed : seeds) {
    run(seed);
    ++tried;
    for (int m = 0; m < kMutationsPerSeed; ++m) {
      std::vector<uint8_t> x = seed;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        switch (rng() % 4) {
          case 0:
            if (!x.empty()) x[rng() % x.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
            break;
          case 1:
            if (!x.empty()) x.resize(rng() % x.size());
            break;
          case 2:
            x.insert(x.begin() + static_cast<long>(x.empty() ? 0 : rng() % x.size()), static_cast<uint8_t>(rng()));
            break;
          case 3:
            if (!x.empty()) x[rng() % x.size()] = static_cast<uint8_t>(rng());
            break;
        }
      }
      run(x);
      ++tried;
    }
  }
  std::printf("replayed %zu inputs without a crash\n", tried);
  return 0;
}
