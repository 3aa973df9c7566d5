#!/usr/bin/env bash
# Installs every build and test dependency of schedcheck from Debian 12 packages.
set -euo pipefail
# librsvg2-bin (rsvg-convert), python3-jsonschema and python3-yaml serve tests only: the SVG
# rendering and schema tests skip without them. clang-14 and libclang-rt-14-dev (libFuzzer and
# the sanitizer runtimes) serve CI's second compiler, the sanitizer build and the fuzzers.
# ccache (optional: scripts/build.sh uses it when present) makes rebuilds and fresh clones fast.
pkgs=(build-essential cmake pkg-config libz3-dev libboost-graph-dev libyaml-cpp-dev catch2
      libfmt-dev nlohmann-json3-dev libcli11-dev libtomlplusplus-dev python3 librsvg2-bin python3-jsonschema python3-yaml
      clang-14 libclang-rt-14-dev ccache)
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
