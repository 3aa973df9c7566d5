#!/usr/bin/env bash
# Configures and builds schedcheck into build/ (Release with debug info): every target, or only
# the targets named as arguments (`./scripts/build.sh schedcheck` builds the binary alone, without
# the tests and benchmarks). With ccache installed,
# compiles go through it, with paths taken relative to the checkout (and the working directory
# left out of the hash) so that any clone shares hits.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "$(nproc)" "${targets[@]}"
