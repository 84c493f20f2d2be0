#!/usr/bin/env bash
# Installs the dependencies (Debian packages) and builds an optimised keel into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKEEL_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target keel
