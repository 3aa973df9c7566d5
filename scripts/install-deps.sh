#!/usr/bin/env bash
# Installs the dependencies of schedcheck from Debian 12 packages.
#   scripts/install-deps.sh            everything to build and test (the README's commands)
#   scripts/install-deps.sh --build    only what building the schedcheck binary needs (a CI job
#                                      that runs schedcheck on its configs: docs/ci.md)
set -euo pipefail
# Building: the compiler, CMake and the libraries the binary links (Z3, Boost.Graph, yaml-cpp,
# fmt, nlohmann-json, CLI11, toml++). Configure with -DSCHEDCHECK_TESTS=OFF when only these
# are installed: the tests need Catch2.
build=(build-essential cmake pkg-config libz3-dev libboost-graph-dev libyaml-cpp-dev libfmt-dev nlohmann-json3-dev
       libcli11-dev libtomlplusplus-dev)
# Testing: librsvg2-bin (rsvg-convert), python3-jsonschema and python3-yaml serve tests only: the
# SVG rendering and schema tests skip without them. clang-14 and libclang-rt-14-dev (libFuzzer
# and the sanitizer runtimes) serve CI's second compiler, the sanitizer build and the fuzzers.
# ccache (optional: scripts/build.sh uses it when present) makes rebuilds and fresh clones fast.
tests=(catch2 python3 librsvg2-bin python3-jsonschema python3-yaml clang-14 libclang-rt-14-dev ccache)
case "${1:-}" in
  "") pkgs=("${build[@]}" "${tests[@]}") ;;
  --build) pkgs=("${build[@]}") ;;
  *) echo "usage: scripts/install-deps.sh [--build]" >&2; exit 1 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
