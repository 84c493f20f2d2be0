#!/usr/bin/env bash
# Installs everything keel needs to build and test, from Debian 12 packages only.
# Idempotent: packages already present are left alone, so running it twice is cheap.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev      # JSON
  libboost-dev            # Beast and Asio: keel serve's event-driven HTTP server
  libcpp-httplib-dev      # the tests' HTTP client
  libpcre2-dev            # tokenizer pre-tokenizer regexes
  libhwy-dev              # portable SIMD with runtime dispatch
  libgtest-dev libgmock-dev
  libbenchmark-dev
  clang                   # only reads sources: the thread-safety analysis test (util/thread_annotations.h)
  haproxy                 # the balancer of deploy/haproxy (replicas with session affinity) and its tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Node.js and npm for the client tests (Claude Code and the official SDKs, tests/clients). Checked
# as commands, not packages: a NodeSource `nodejs` package bundles npm and conflicts with Debian's.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if ((${#missing[@]})); then
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
