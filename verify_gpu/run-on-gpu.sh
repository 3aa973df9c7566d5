#!/usr/bin/env bash
# On a machine with a GPU: builds schedcheck with CUDA, runs the GPU tests (ctest -L gpu) and
# `schedcheck run` on the GPU examples, and writes every figure to one results folder.
#   verify_gpu/run-on-gpu.sh [RESULTS_DIR]      (default: $OUT if set, else verify_gpu/results)
# Takes a few minutes: configure + build (16 cores ~2-3 min), gpu tests (~20 s), six specs run
# twice each (text with trace, then JSON; ~1 min).
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS="${1:-${OUT:-verify_gpu/results}}"
mkdir -p "$RESULTS"
LOG="$RESULTS/results.txt"
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }

say "# schedcheck run on a GPU, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee -a "$LOG"

# Dependencies (Debian packages; a machine without network keeps what it has).
./scripts/install-deps.sh >>"$LOG" 2>&1 || say "warning: install-deps.sh failed (no network?); using the installed packages"

BUILD=build-gpu
JOBS="$(nproc)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWITH_CUDA=ON -DSCHEDCHECK_GPU_TESTS=ON \
      -DSCHEDCHECK_BENCH=OFF >>"$LOG" 2>&1 || { say "error: configure failed (see $LOG)"; exit 1; }
cmake --build "$BUILD" -j "$JOBS" --target schedcheck schedcheck_gpu_tests >>"$LOG" 2>&1 \
  || { say "error: build failed (see $LOG)"; tail -40 "$LOG"; exit 1; }
say "build: ok"

say "## ctest -L gpu"
ctest --test-dir "$BUILD" -L gpu --output-on-failure 2>&1 | tee -a "$LOG"
GPU_TESTS=${PIPESTATUS[0]}

status=0
run() {  # name, spec, extra args
  local name="$1" spec="$2"
  shift 2
  say "## schedcheck run $spec $*"
  timeout 300 "./$BUILD/schedcheck" run "$spec" --repeat 5 --trace "$RESULTS/$name.trace.json" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  timeout 300 "./$BUILD/schedcheck" run "$spec" --repeat 5 --format json "$@" >"$RESULTS/$name.json" 2>>"$LOG"
  say "exit code: $rc"
  [ "$rc" -eq 0 ] || status=1
}
run 1f1b-p4-m8 examples/gpu-1f1b-p4-m8.yaml
run zbh1-p4-m8 examples/gpu-zbh1-p4-m8.yaml
run 1f1b-p4-m8-sendrecv examples/gpu-1f1b-p4-m8.yaml --lower pytorch
run zbh1-p4-m8-sendrecv examples/gpu-zbh1-p4-m8.yaml --lower deferred --semantics rendezvous
run fsdp2-8layers examples/gpu-fsdp2-8layers.yaml
run megatron-pp2-parity-batched examples/megatron-pp2-shape-exchange-parity.yaml

say "## summary: gpu tests exit $GPU_TESTS, runs $([ $status -eq 0 ] && echo agree || echo 'DIFFER or failed')"
[ "$GPU_TESTS" -eq 0 ] && [ $status -eq 0 ]
