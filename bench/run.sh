#!/usr/bin/env bash
# Runs the benchmarks behind bench/README.md's tables and writes the tables in place.
#
#   bench/run.sh [--build DIR] [--print] [TABLE...]
#
# TABLE is one of the names below (default: all of them); each is written between
# `<!-- bench table: TABLE -->` and `<!-- end of bench table -->` in bench/README.md, under a line
# naming the machine (nproc, CPU model, memory, load average at the start), the commit of the
# checkout the build folder was configured from (git rev-parse --short HEAD there; "with local
# changes" when its sources differ from it) and the date. --print prints the tables and writes nothing.
# --build DIR takes the benchmarks from DIR/bench (default: build). The script builds nothing: build
# the benchmarks first, e.g.
#   ./scripts/build.sh verify_bench worst_case_memory_bench composed_bench pipeline_scaling_bench \
#     fsdp_bench generators_bench router_bench
# (the figures are of RelWithDebInfo builds: SCHEDCHECK_BUILD_TYPE=RelWithDebInfo ./scripts/build.sh ...;
# the option SCHEDCHECK_BENCH=OFF leaves them out).
#
# Tables, their commands and about how long they take on a 2-core machine:
#   verify_bench             verify_bench                                     2 s
#   worst_case_memory_bench  worst_case_memory_bench; ... 32 100000           1 s
#   composed_bench           composed_bench                                   3 s
#   pipeline_scaling_bench   pipeline_scaling_bench --big (7.3 M ops, 1.5 GiB) 25 s
#   fsdp_bench               fsdp_bench; ... 128 1024; ... 2 65536             2 min
#   fsdp_every_rank          fsdp_bench --every-rank --big                    35 s
#   generators_bench         generators_bench                                 2 s
#   router_bench             router_bench 12                                  2 min
# All of them: about 4 minutes.
#
# Regressions: a figure more than 2x worse than in the committed table (git show HEAD:bench/README.md;
# seconds, resident memory and bytes per op higher, ops per second lower; same table, row and
# column) is printed as "regression: ..." and the script exits 3 after writing. Figures below a
# floor (0.05 s, 16 MiB) are not compared: at that size a shared machine's noise is larger than 2x.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile

README = "bench/README.md"
BEGIN = "<!-- bench table: {} -->"
END = "<!-- end of bench table -->"
FACTOR = 2.0
FLOOR = {"s": 0.05, "MiB": 16.0}


def secs(x):
    x = float(x)
    return f"{x:.3f} s" if x < 1 else f"{x:.2f} s" if x < 10 else f"{x:.1f} s"


def count(x):
    return f"{int(x):,}"


def mib(x):
    x = float(x)
    return f"{x:.1f} MiB" if x < 100 else f"{x:.0f} MiB"


def rate(x):
    return f"{float(x) / 1e6:.2f} M"


def series_rows(text, ncols):
    """[(series title, label, numbers, exponent values or None)] of a bench that prints series: a
    title line, a header line, rows whose last ncols fields are figures, then `exponent` lines
    for the rows after the first."""
    out, title, rows_in_series, exps = [], "", [], 0
    lines = text.splitlines()
    for k, line in enumerate(lines):
        f = line.split()
        if not f:
            continue
        if f[0] == "exponent":
            exps += 1
            if exps < len(rows_in_series):
                i = rows_in_series[exps]
                out[i] = out[i][:3] + (f[2:],)
            continue
        nums = f[-ncols:]
        if len(f) > ncols and all(re.fullmatch(r"[0-9.]+s?|-", n) for n in nums[:-1]):
            out.append((title, " ".join(f[:-ncols]), nums, None))
            rows_in_series.append(len(out) - 1)
            continue
        nxt = lines[k + 1].split() if k + 1 < len(lines) else []
        if nxt and nxt[0] in ("schedule", "units"):
            title, rows_in_series, exps = line.strip(), [], 0
    return out


def t_verify(outs):
    head = ["p", "m", "ops", "all passes but worst-case memory", "ops/s", "worst case, prefix scan",
            "worst case, min cut (all ranks)", "peak RSS", "bytes/op"]
    rows = []
    for line in outs[0].splitlines():
        f = line.split()
        if len(f) == 10 and f[0].isdigit():
            rows.append([f[0], f[1], count(f[2]), secs(f[3].rstrip("s")), rate(f[4]), secs(f[5].rstrip("s")),
                         "—" if f[6] == "-" else secs(f[6].rstrip("s")), mib(f[7]), f[8]])
    return head, 2, rows


def t_wcm(outs):
    head = ["ranks", "ops", "seconds", "peak RSS"]
    rows = []
    for out in outs:
        for line in out.splitlines():
            f = line.split()
            if len(f) == 6 and f[0].isdigit():
                rows.append([f[1], count(f[0]), secs(f[3]), mib(f[5])])
    return head, 2, rows


def t_composed(outs):
    passes = ["build", "deadlock", "numerics", "buffer residency", "timing", "worst-case memory"]
    head = ["m", "ranks", "ops", "total"] + passes + ["exponent"]
    rows = []
    for line in outs[0].splitlines():
        f = line.split()
        if len(f) > 8 and all(x.isdigit() for x in f[:6]):
            got = dict((m.group(1).strip(), m.group(2)) for m in re.finditer(r"([a-z][a-z -]*?) ([0-9]+\.[0-9]+)", line.split("holds", 1)[-1]))
            exp = re.search(r"exponent ([0-9.]+)", line)
            rows.append([f[3], f[4], count(f[5]), secs(f[6].rstrip("s"))] + [secs(got[p]) if p in got else "-" for p in passes]
                        + [exp.group(1) if exp else ""])
    return head, 2, rows


def t_pipeline(outs):
    head = ["series", "input", "p", "m", "ops", "read", "lower", "build", "deadlock", "timing", "worst case",
            "verify (every pass)", "verify exponent", "peak RSS", "bytes/op"]
    rows = []
    # n: p m ops read lower build deadlock timing worst-case verify rss-MiB bytes/op; exp: the
    # exponents of read lower build deadlock timing worst-case verify bytes/op
    for title, label, n, exp in series_rows(outs[0], 12):
        series = title.split(", ")[-1].split(" (")[0] if title else ""
        lower = "-" if label.endswith("comms") else secs(n[4])
        rows.append([series, label, n[0], n[1], count(n[2]), secs(n[3]), lower] + [secs(x) for x in n[5:10]]
                    + [exp[6] if exp else "", mib(n[10]), n[11]])
    return head, 4, rows


def t_fsdp(outs):
    head = ["case", "ops", "lower", "deadlock", "residency", "timing", "worst case", "figures", "total", "peak RSS"]
    rows = []
    for out in outs:
        for line in out.splitlines():
            f = line.split()
            # label, ops, lower, deadlock, residency, timing, worst case, figures, total, RSS MiB, verdict
            if len(f) > 10 and f[-10].isdigit() and re.fullmatch(r"[0-9.]+", f[-2]):
                n = f[-10:-1]
                rows.append([" ".join(f[:-10]), count(n[0])] + [secs(x) for x in n[1:8]] + [mib(n[8])])
    return head, 1, rows


def t_fsdp_every(outs):
    head = ["series", "units x ranks", "ops", "lower", "deadlock", "residency", "timing", "worst case", "total",
            "total exponent", "peak RSS", "bytes/op"]
    rows = []
    for title, label, n, exp in series_rows(outs[0], 9):
        series = title.split(", ")[-1] if title else ""
        rows.append([series, label, count(n[0])] + [secs(x) for x in n[1:7]] + [exp[5] if exp else "", mib(n[7]), n[8]])
    return head, 2, rows


def t_generators(outs):
    head = ["schedule", "ops", "generate", "verify", "ops/s", "peak RSS"]
    rows = []
    for line in outs[0].splitlines():
        f = line.split()
        if len(f) == 7 and f[1].isdigit() and f[2].endswith("s"):
            rows.append([f[0], count(f[1]), secs(f[2].rstrip("s")), secs(f[3].rstrip("s")), rate(f[4]), mib(f[5])])
    return head, 1, rows


def t_router(outs):
    head = ["policy", "seq_len", "prefix causality", "batch independence", "train/inference", "drop-freedom",
            "determinism", "total"]
    rows = []
    for line in outs[0].splitlines():
        f = line.split()
        if len(f) >= 9 and all(re.fullmatch(r"[0-9.]+", x) for x in f[-8:]):
            rows.append([" ".join(f[:-8]), f[-7]] + [f"{float(x):.2f}" for x in f[-6:]])
    return head, 2, rows


TABLES = {
    "verify_bench": ([["verify_bench"]], t_verify),
    "worst_case_memory_bench": ([["worst_case_memory_bench"], ["worst_case_memory_bench", "32", "100000"]], t_wcm),
    "composed_bench": ([["composed_bench"]], t_composed),
    "pipeline_scaling_bench": ([["pipeline_scaling_bench", "--big"]], t_pipeline),
    "fsdp_bench": ([["fsdp_bench"], ["fsdp_bench", "128", "1024"], ["fsdp_bench", "2", "65536"]], t_fsdp),
    "fsdp_every_rank": ([["fsdp_bench", "--every-rank", "--big"]], t_fsdp_every),
    "generators_bench": ([["generators_bench"]], t_generators),
    "router_bench": ([["router_bench", "12"]], t_router),
}


def source_of(build):
    """(short commit, whether src/, solver/ or bench/ sources differ from it) of the checkout the
    build folder was configured from (CMakeCache.txt's CMAKE_HOME_DIRECTORY)."""
    src = "."
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    src = line.split("=", 1)[1].strip()
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no", "--", "src", "solver",
                            "bench/*.cc", "bench/*.h", "bench/CMakeLists.txt", "CMakeLists.txt"],
                           capture_output=True, text=True).stdout.strip()
    return commit or "unknown", bool(dirty)


def machine_line(build):
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    commit, dirty = source_of(build)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return (f"Measured by `bench/run.sh` on {os.cpu_count()} cores ({cpu}), {mem_kib / 2**20:.0f} GiB memory, "
            f"load average {load} at the start; commit {commit}{' with local changes to its sources' if dirty else ''}; {date}.")


def table_text(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def parse_table(text):
    head, rows = None, []
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if head is None:
            head = cells
        else:
            rows.append(cells)
    return head, rows


def value(cell):
    """(number in the cell's base unit, unit) or None: seconds, MiB, ops/s; bare numbers as is."""
    m = re.match(r"^([0-9][0-9,]*(?:\.[0-9]+)?)\s*(s|ms|MiB|GiB|M|k)?\b", cell)
    if not m:
        return None
    x, unit = float(m.group(1).replace(",", "")), m.group(2) or ""
    return {"ms": (x / 1e3, "s"), "GiB": (x * 1024, "MiB"), "M": (x * 1e6, "/s"), "k": (x * 1e3, "/s")}.get(unit, (x, unit))


def regressions(name, head, key, old_head, old_rows, rows):
    if not old_head:
        return []
    found = []
    old = {tuple(r[:key]): r for r in old_rows}
    for r in rows:
        o = old.get(tuple(r[:key]))
        if not o:
            continue
        for c, h in enumerate(head):
            if c < key or h not in old_head or "exponent" in h or h in ("ops", "p", "m", "ranks", "seq_len"):
                continue
            a, b = value(o[old_head.index(h)]), value(r[c])
            if not a or not b or a[0] <= 0 or b[0] <= 0:
                continue
            higher_better = h == "ops/s"
            unit = a[1] or ("s" if name == "router_bench" else "")
            if unit in FLOOR and max(a[0], b[0]) < FLOOR[unit]:
                continue
            worse = a[0] / b[0] if higher_better else b[0] / a[0]
            if worse > FACTOR:
                found.append(f"regression: {name}: {', '.join(r[:key])}: {h} {o[old_head.index(h)]} -> {r[c]} ({worse:.1f}x worse)")
    return found


def write_atomically(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".README.md.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(prog="bench/run.sh", description="Runs the benchmarks and writes bench/README.md's tables.")
    ap.add_argument("--build", default="build")
    ap.add_argument("--print", action="store_true", dest="print_only")
    ap.add_argument("tables", nargs="*", metavar="TABLE")
    args = ap.parse_args()
    unknown = [t for t in args.tables if t not in TABLES]
    if unknown:
        sys.exit(f"bench/run.sh: unknown table {', '.join(unknown)}; tables: {', '.join(TABLES)}")
    names = args.tables or list(TABLES)
    needed = sorted({run[0] for n in names for run in TABLES[n][0]})
    missing = [b for b in needed if not os.access(os.path.join(args.build, "bench", b), os.X_OK)]
    if missing:
        sys.exit(f"bench/run.sh: {', '.join(os.path.join(args.build, 'bench', b) for b in missing)} not built; build with\n"
                 f"  ./scripts/build.sh {' '.join(missing)}")
    with open(README) as f:
        readme = f.read()
    # regressions are against the committed tables (the file's own where git has none)
    committed = subprocess.run(["git", "show", "HEAD:" + README], capture_output=True, text=True)
    baseline = committed.stdout if committed.returncode == 0 else readme
    line = machine_line(args.build)
    found, status = [], 0
    for name in names:
        begin = BEGIN.format(name)
        marked = readme.count(begin) == 1 and END in readme[readme.find(begin):]
        if not marked and not args.print_only:
            sys.exit(f"bench/run.sh: {README} has no '{begin}' ... '{END}' section")
        runs, parse = TABLES[name]
        outs = []
        for run in runs:
            cmd = [os.path.join(args.build, "bench", run[0])] + run[1:]
            print(f"bench/run.sh: {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
            if p.returncode != 0:
                sys.exit(f"bench/run.sh: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}")
            outs.append(p.stdout)
        head, key, rows = parse(outs)
        if not rows:
            sys.exit(f"bench/run.sh: {name}: no rows in the benchmark's output (has its format changed?)")
        text = table_text(head, rows)
        print(f"{name}:\n{text}\n")
        if marked:
            start = readme.index(begin) + len(begin)
            end = readme.index(END, start)
            if begin in baseline:
                b = baseline.index(begin) + len(begin)
                old_head, old_rows = parse_table(baseline[b:baseline.index(END, b)])
                found += regressions(name, head, key, old_head, old_rows, rows)
            readme = readme[:start] + "\n" + line + "\n\n" + text + "\n" + readme[end:]
    for r in found:
        print(r)
    if not args.print_only:
        write_atomically(README, readme)
        print(f"bench/run.sh: wrote {len(names)} table(s) to {README}", file=sys.stderr)
    return 3 if found else 0


sys.exit(main())
PY
