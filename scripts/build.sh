#!/usr/bin/env bash
# Configures and builds schedcheck into build/: every target, or only the targets named as
# arguments (`./scripts/build.sh schedcheck` builds the binary alone, without the tests and
# benchmarks). The build type is Release (an optimised binary without debug information, a few
# MB); SCHEDCHECK_BUILD_TYPE picks another: RelWithDebInfo (the benchmarks' figures, a debugger
# with optimised code) or Debug, as in `SCHEDCHECK_BUILD_TYPE=Debug ./scripts/build.sh`.
# With ccache installed, compiles go through it, with paths taken relative to the checkout (and
# the working directory left out of the hash) so that any clone shares hits.
set -euo pipefail
cd "$(dirname "$0")/.."
build_type="${SCHEDCHECK_BUILD_TYPE:-Release}"
case "$build_type" in
  Release|RelWithDebInfo|Debug|MinSizeRel) ;;
  *) echo "build.sh: SCHEDCHECK_BUILD_TYPE=$build_type: expected Release, RelWithDebInfo, Debug or MinSizeRel" >&2
     exit 1 ;;
esac
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE="$build_type" "${launcher[@]}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "$(nproc)" "${targets[@]}"
