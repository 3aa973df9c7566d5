#!/usr/bin/env bash
# Configures and builds schedcheck with clang 14, AddressSanitizer and UndefinedBehaviorSanitizer,
# and the libFuzzer harnesses of fuzz/, into build-asan/ (README.md, "Fuzzing and sanitizers").
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
      -DSCHEDCHECK_FUZZ=ON -DSCHEDCHECK_BENCH=OFF -DWITH_CUDA=OFF "${launcher[@]}" >/dev/null
cmake --build build-asan -j "${JOBS:-$(nproc)}"
