#!/usr/bin/env bash
# The kernel tests on ARM (aarch64, NEON), on any x86 machine: cross-compiled with Debian's aarch64
# compiler and run under qemu-user. This checks that the NEON kernels build and compute what the
# x86 ones do (correctness only: an emulated CPU says nothing about speed). Each test runs on
# every target the emulated CPU reports (test::for_each_simd_target).
#
# Not part of scripts/test.sh: it adds the arm64 architecture to dpkg and installs a cross
# toolchain, which the default test command should not do to a user's machine. The cross build
# and the emulated run take about 3 minutes on 2 cores. In CTest only when configured with
# -DKEEL_ARM_TESTS=ON, as `arm_kernel_tests` with the label arm (`ctest -L arm`). Installs what it
# needs on first use:
#   dpkg --add-architecture arm64; apt-get install g++-aarch64-linux-gnu qemu-user
#   libhwy-dev:arm64 libgtest-dev:arm64
# Usage: scripts/test-arm.sh [gtest filter]   (default: the ops kernel suites)
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
[[ -f /usr/lib/aarch64-linux-gnu/libhwy.so ]] || need+=(libhwy-dev:arm64)
[[ -f /usr/lib/aarch64-linux-gnu/libgtest.a ]] || need+=(libgtest-dev:arm64)
if ((${#need[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo dpkg --add-architecture arm64
  $sudo apt-get update -q
  $sudo apt-get install -y -q "${need[@]}"
fi

out=build-arm
mkdir -p "$out/obj"
# Kernels and what they stand on (ops, model, util; KV attention and its row formats), and the
# kernel test files.
sources=(src/keel/ops/*.cpp src/keel/model/*.cpp src/keel/util/*.cpp
         src/keel/kv/kv_attention.cpp src/keel/kv/kv_attention_kernels.cpp src/keel/kv/kv_format.cpp
         src/keel/kv/kv_rotation.cpp tests/kv_attention_test.cpp
         tests/ops_ggml_matmul_test.cpp tests/ops_mlx_matmul_test.cpp tests/ops_mxfp4_test.cpp
         tests/ops_matmul_batch_test.cpp tests/ops_gated_delta_rule_test.cpp tests/util_thread_pool_test.cpp tests/test_support.cpp
         tests/simd_target_support.cpp tests/guarded_bytes_support.cpp)
# -ffp-contract=off as CMakeLists.txt builds keel: fused multiply-adds the source does not ask for
# would break the bit-identity the tests check between paths (an x86 build without it fails 36).
flags=(-std=c++20 -O2 -ffp-contract=off -Isrc -Itests "-DKEEL_SOURCE_DIR=\"$PWD\"" -DKEEL_BINARY=\"\" -DKEEL_RELEASE_BINARY=\"\"
       -DKEEL_VERSION=\"arm-test\" "-DHWY_DISABLED_TARGETS=(HWY_SVE|HWY_SVE2|HWY_SVE_256|HWY_SVE2_128)")
objects=()
for src in "${sources[@]}"; do
  obj="$out/obj/$(echo "$src" | tr / _).o"
  objects+=("$obj")
  echo "test-arm: compiling $src" >&2
  aarch64-linux-gnu-g++ "${flags[@]}" -c "$src" -o "$obj" &
  while (($(jobs -r | wc -l) >= $(nproc))); do wait -n; done
done
while (($(jobs -r | wc -l) > 0)); do wait -n; done
aarch64-linux-gnu-g++ -o "$out/kernel_tests" "${objects[@]}" -lgtest -lgtest_main -lhwy -lpthread

filter="${1:-*OpsGgml*:*OpsMlx*:*OpsMxfp4*:*OpsMatmulBatch*:*GatedDeltaRule*:ThreadPool*:KvAttention*}"  # parametrized suites carry a prefix
# The arm64 libraries linked above (libhwy, libgtest) come with Debian's arm64 C library under
# /lib/aarch64-linux-gnu; the loader must be that one too. (The cross toolchain's own copy under
# /usr/aarch64-linux-gnu is older: with it, the first thread a test starts hangs.)
QEMU_LD_PREFIX=/ qemu-aarch64 "$out/kernel_tests" --gtest_filter="$filter"
