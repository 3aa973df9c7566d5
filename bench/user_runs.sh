#!/usr/bin/env bash
# Speed as a user meets it: each command is one schedcheck process started cold, after the
# machine has been idle for a pause, on one core (taskset -c 0) and on two (taskset -c 0,1), and
# the median of several runs is reported with the range. Writes the table between
# `<!-- bench table: user_runs -->` and `<!-- end of bench table -->` in bench/README.md, under a
# line naming the machine, the commit and the date.
#
#   bench/user_runs.sh [--build DIR] [--runs N] [--pause SECONDS] [--print]
#
# --build DIR: the schedcheck binary in DIR (default build; a Release build, as the README's
# command makes). --runs: runs per command and core count (default 5). --pause: idle seconds
# before each run (default 10): pages the previous run held are handed back and a run starts as a
# user's first run does. --print prints the table and writes nothing. About
# (pause + 2 s) x runs x 2 x 7 commands: 16 minutes with the defaults.
#
# Commands: verify of PyTorch's comms CSV of 1F1B at p = 64, m = 8192 (3.1 M ops, made by
# `schedcheck gen`), Python reading the same file with list(csv.reader(f)) (the floor a CSV
# reader is measured against), verify of Meta's Llama 3 405B layout on 16,384 GPUs, of
# torchtitan's 405B FSDP config at 131,072 GPUs (the symmetry quotient) and of the torchtitan PP 2
# example, a small spec (the start-up cost), and `plan` of Llama 3 70B on 512 H100.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import argparse, datetime, json, os, re, statistics, subprocess, sys, tempfile, time

README = "bench/README.md"
BEGIN = "<!-- bench table: user_runs -->"
END = "<!-- end of bench table -->"

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--pause", type=float, default=10.0)
ap.add_argument("--print", action="store_true")
args = ap.parse_args()
binary = os.path.abspath(os.path.join(args.build, "schedcheck"))
if not os.access(binary, os.X_OK):
    sys.exit(f"bench/user_runs.sh: {binary}: not built (./scripts/build.sh schedcheck)")
ncpu = os.cpu_count() or 1
if ncpu < 2:
    sys.exit("bench/user_runs.sh: needs 2 cores to measure on one and on two")

def run_once(cmd, cpus):
    """(wall seconds, peak RSS bytes) of one cold process pinned to `cpus`."""
    time.sleep(args.pause)
    t = time.perf_counter()
    p = subprocess.Popen(["taskset", "-c", cpus] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    return wall, ru.ru_maxrss * 1024

def secs(x):
    return f"{x:.3f} s" if x < 1 else f"{x:.2f} s"

def measure(cmd):
    out = {}
    for cpus, label in (("0", "1 core"), ("0,1", "2 cores")):
        runs = [run_once(cmd, cpus) for _ in range(args.runs)]
        walls = sorted(w for w, _ in runs)
        out[label] = (statistics.median(walls), walls[0], walls[-1], max(r for _, r in runs))
    return out

def ops_of(cmd):
    try:
        rec = json.loads(subprocess.run(cmd + ["--format", "json"], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL).stdout)
        rec = rec[0] if isinstance(rec, list) else rec
        return rec.get("stats", {}).get("ops")
    except Exception:
        return None

with tempfile.TemporaryDirectory(prefix="user-runs-") as tmp:
    csv_path = os.path.join(tmp, "1f1b-p64-m8192-comms.csv")
    subprocess.run([binary, "gen", "1f1b", "--ranks", "64", "--microbatches", "8192", "--comms", "pytorch",
                    "-o", csv_path], check=True, stdout=subprocess.DEVNULL)
    rows = [
        ("verify, PyTorch comms CSV, 1F1B p = 64, m = 8192", [binary, "verify", csv_path]),
        ("Python list(csv.reader(f)) of the same CSV", [sys.executable, "-c",
         "import csv,sys; list(csv.reader(open(sys.argv[1], newline='')))", csv_path]),
        ("verify, Llama 3 405B layout, 16,384 GPUs", [binary, "verify",
         "specs/reference/published/llama3-paper-405b-h100x16384.toml"]),
        ("verify, torchtitan Llama 3.1 405B FSDP x TP 8, 131,072 GPUs (one rank built)", [binary, "verify",
         "specs/reference/torchtitan-llama3-405b-h100x128.toml", "--gpus", "131072", "--hardware", "h100-96gb"]),
        ("verify, torchtitan Llama 3 8B PP 2 example", [binary, "verify", "examples/torchtitan-llama3-8b-pp2.toml"]),
        ("verify, 4-rank 1F1B spec (start-up)", [binary, "verify", "examples/gpu-1f1b-p4-m8.yaml"]),
        ("plan, Llama 3 70B on 512 H100", [binary, "plan", "--model", "llama3-70b", "--hardware", "h100", "--gpus",
         "512", "--global-batch-tokens", "4M", "--seq-len", "8192"]),
    ]
    results = []
    for name, cmd in rows:
        print(f"user_runs: {name} ...", file=sys.stderr, flush=True)
        ops = ops_of(cmd) if cmd[0] == binary and cmd[1] == "verify" else None
        results.append((name, ops, measure(cmd)))

head = ["command", "ops", "1 core: median (min-max)", "2 cores: median (min-max)", "peak RSS"]
lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
python_1 = results[1][2]["1 core"][0]
for name, ops, m in results:
    cell = lambda k: f"{secs(m[k][0])} ({secs(m[k][1])}-{secs(m[k][2])})"
    rss = max(m["1 core"][3], m["2 cores"][3])
    lines.append(f"| {name} | {f'{ops:,}' if ops else '-'} | {cell('1 core')} | {cell('2 cores')} | {rss / 2**20:.0f} MiB |")
csv_1, csv_2 = results[0][2]["1 core"][0], results[0][2]["2 cores"][0]
git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE, text=True).stdout.strip()
dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], stdout=subprocess.PIPE, text=True).stdout.strip()
cpu = ""
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except Exception:
    pass
mem = ""
try:
    mem = f"{int(next(l.split()[1] for l in open('/proc/meminfo') if l.startswith('MemTotal'))) / 2**20:.0f} GiB memory, "
except Exception:
    pass
load = os.getloadavg()[0]
note = (f"Measured by `bench/user_runs.sh` on {ncpu} cores ({cpu}), {mem}load average {load:.2f} at the end; "
        f"commit {git}{' with local changes' if dirty else ''}; {datetime.date.today().isoformat()}; "
        f"{args.runs} cold runs per cell, each after {args.pause:g} s idle.")
summary = (f"verify of the comms CSV takes {csv_1 / python_1:.1f}x Python's list(csv.reader(f)) on one core "
           f"and {csv_2 / python_1:.1f}x on two (medians).")
table = "\n".join([note, "", *lines, "", summary])
if args.print:
    print(table)
    sys.exit(0)
text = open(README, encoding="utf-8").read()
if BEGIN not in text:
    sys.exit(f"bench/user_runs.sh: {README} has no {BEGIN} marker")
start = text.index(BEGIN) + len(BEGIN)
end = text.index(END, start)
new = text[:start] + "\n" + table + "\n" + text[end:]
tmp = README + ".tmp"
open(tmp, "w", encoding="utf-8").write(new)
os.replace(tmp, README)
print(table)
PY
