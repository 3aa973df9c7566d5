#!/usr/bin/env bash
# Reading speed on the largest CSV input: `schedcheck verify` of PyTorch's comms CSV of 1F1B at
# p = 64, m = 8192 (3.1 M ops) against Python's csv.reader summing the cells of the same file,
# side by side in one run, best of three each.
#
#   bench/csv_vs_python.sh [BUILD]      (default BUILD: build; needs BUILD/schedcheck and python3)
#
# Prints one table row: ops, bytes, csv.reader seconds, verify seconds, their ratio, and verify's
# own per-pass seconds (stats.seconds_per_pass of the JSON report).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}/schedcheck"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" gen 1f1b --ranks 64 --microbatches 8192 --comms pytorch -o "$tmp/1f1b-p64-m8192-comms.csv"
python3 - "$bin" "$tmp/1f1b-p64-m8192-comms.csv" <<'PY'
import json, os, subprocess, sys, time
binary, path = sys.argv[1], sys.argv[2]
def best(cmd):
    times = []
    for _ in range(3):
        t = time.perf_counter()
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False).stdout
        times.append(time.perf_counter() - t)
    return min(times), out
py, _ = best([sys.executable, "-c", "import csv,sys; sum(len(r) for r in csv.reader(open(sys.argv[1])))", path])
sc, out = best([binary, "verify", path, "--format", "json"])
stats = json.loads(out)["stats"]
passes = ", ".join(f"{k} {v:.2f}" for k, v in sorted(stats["seconds_per_pass"].items(), key=lambda kv: -kv[1]))
print("| ops | bytes | csv.reader | schedcheck verify | ratio | verify's passes (s) |")
print("|---|---|---|---|---|---|")
print(f"| {stats['ops']:,} | {os.path.getsize(path):,} | {py:.2f} s | {sc:.2f} s | {sc / py:.1f}x | {passes} |")
PY
