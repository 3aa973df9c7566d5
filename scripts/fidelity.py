#!/usr/bin/env python3
"""Measures schedcheck's time and memory predictions against published training runs.

Reads specs/reference/published/runs.toml (each run: a config as its framework writes it, the GPUs
and hardware preset the config does not state, the published figure with its metric and source),
verifies each config with the schedcheck binary, and prints a Markdown table of published against
predicted figures with the signed error.

  scripts/fidelity.py [--binary build/schedcheck]            print the table
  scripts/fidelity.py --write docs/fidelity.md               replace the table between the markers
  scripts/fidelity.py --check docs/fidelity.md               exit 1 when the committed table and a
                                                             fresh run differ by more than 0.5
                                                             percentage points of error on any run,
                                                             or a run is outside ±15 % throughput
                                                             (fitted or held out) or ±10 %
                                                             published memory, unless runs.toml
                                                             names it an open miss

Held out: leave-one-source-out. Each run is also predicted with the parameters fitted without the
publication it comes from: a GPU preset whose fitted run (runs.toml `fitted`) shares the run's
source is refitted (--efficiency, by bisection) on the first run of that GPU from another source;
a GPU with no other source gives its runs no held-out figure. The bands reports quote are the
held-out errors.

An open miss (`open_miss = "what the model lacks"` in runs.toml) is a run outside a band for a
reason the model does not capture yet: the table marks it and lists the reason under it, and the
check fails when such a run comes back into its bands (so the mark is removed with the fix).

Metrics (runs.toml): tokens_per_s_per_gpu is the job's predicted tokens per second over its world
size; tflops_per_gpu is the model FLOPs per step (the job's flops_per_step, 6 N per token plus
attention, docs/facts/cost-formulas.md) over the step time and the world size. Memory is the
predicted peak of the fullest rank in GiB (2^30 bytes).
"""
import argparse
import json
import os
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "specs", "reference", "published")
BEGIN = "<!-- fidelity table: scripts/fidelity.py --write docs/fidelity.md -->"
END = "<!-- end of fidelity table -->"
TOLERANCE_PP = 0.5
THROUGHPUT_BAND_PCT = 15.0
MEMORY_BAND_PCT = 10.0


def predict(binary, run, efficiency=None):
    """(predicted figure, predicted peak GiB, verdict, note) of one run; `efficiency` overrides the
    hardware preset's fitted one (--efficiency)."""
    path = os.path.join(CORPUS, run["file"])
    cmd = [binary, "verify", path, "--gpus", str(run["gpus"]), "--hardware", run["hardware"], "--format", "json"]
    if efficiency is not None:
        cmd += ["--efficiency", f"{efficiency:.6f}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    try:
        report = json.loads(p.stdout)
    except json.JSONDecodeError:
        return None, None, "error", (p.stderr.strip().splitlines() or ["no report"])[0]
    job = report.get("job", {})
    pred = job.get("predicted")
    verdict = report.get("verdict", "error")
    if not pred:
        return None, None, verdict, "no prediction"
    world = job["world"]
    if run["metric"] == "tokens_per_s_per_gpu":
        figure = pred["tokens_per_s"] / world
    elif run["metric"] == "tflops_per_gpu":
        figure = job["flops_per_step"] / pred["step_time_s"] / world / 1e12
    elif run["metric"] == "tflops_per_gpu_sc21":
        # Narayanan et al. 2021 (arXiv 2104.04473) eq. 3, which counts the recomputed forward:
        # 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per step, over the predicted step and the GPUs.
        f = run["flop_formula"]
        b, s, l, h, v = f["batch"], f["seq"], f["layers"], f["hidden"], f["vocab"]
        flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
        figure = flops / pred["step_time_s"] / world / 1e12
    else:
        raise SystemExit(f"runs.toml: {run['file']}: unknown metric {run['metric']!r}")
    # Published memory is what the caching allocator reserved (torchtitan logs
    # torch.cuda.max_memory_reserved), so the prediction compared is the reserved figure.
    return figure, pred.get("reserved_bytes", pred["peak_bytes"]) / 2**30, verdict, ""


def error_pct(pred, published):
    return None if pred is None else 100.0 * (pred - published) / published


def fmt_err(e):
    return "-" if e is None else f"{e:+.1f} %"


def source_of(run):
    """The publication a run comes from: its source without the table ("..., Table 2")."""
    return run["source"].split(", Table")[0]


def fit_efficiency(binary, run):
    """The efficiency at which `run`'s predicted figure equals its published one (bisection; the
    figure rises with the efficiency)."""
    lo, hi = 0.05, 1.0
    for _ in range(24):
        mid = (lo + hi) / 2
        figure = predict(binary, run, mid)[0]
        if figure is None:
            return None
        if figure < run["published"]:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-5:
            break
    return (lo + hi) / 2


def held_out(binary, runs, rows):
    """Leave-one-source-out: each run predicted with the parameters fitted without its source.
    A GPU preset whose fitted run shares the run's source is refitted on the first run of that
    GPU from another source (not an open miss); a run whose GPU has no other source gets none.
    Adds held_error and held_note to each row."""
    fitted = {r["hardware"]: r for r in runs if r.get("fitted")}
    refits = {}  # (source, hardware) -> (efficiency or None, note)
    for run, row in zip(runs, rows):
        src, hw = source_of(run), run["hardware"]
        own = fitted.get(hw)
        if own is None or source_of(own) != src:
            row["held_error"], row["held_note"] = row["error"], ""
            continue
        if (src, hw) not in refits:
            alt = next((r for r in runs if r["hardware"] == hw and source_of(r) != src and not r.get("open_miss")), None)
            if alt is None:
                refits[(src, hw)] = (None, f"no run on {hw} from another source")
            else:
                eff = fit_efficiency(binary, alt)
                refits[(src, hw)] = (eff, f"{hw} refitted on {alt['file']}: {eff:.3f}")
        eff, note = refits[(src, hw)]
        row["held_note"] = note
        row["held_error"] = None if eff is None else error_pct(predict(binary, run, eff)[0], run["published"])
    return refits


def measure(binary):
    with open(os.path.join(CORPUS, "runs.toml"), "rb") as f:
        runs = tomllib.load(f)["run"]
    rows = []
    for run in runs:
        figure, mem, verdict, note = predict(binary, run)
        rows.append({
            "file": run["file"], "gpus": run["gpus"], "hardware": run["hardware"], "layout": run["layout"],
            "metric": run["metric"], "published": run["published"], "predicted": figure,
            "error": error_pct(figure, run["published"]),
            "memory_published": run.get("memory_gib"), "memory_predicted": mem,
            "memory_error": error_pct(mem, run["memory_gib"]) if run.get("memory_gib") and mem is not None else None,
            "verdict": verdict, "fitted": run.get("fitted", False), "source": run["source"], "note": note,
            "open_miss": run.get("open_miss"),
        })
    held_out(binary, runs, rows)
    return rows


def table(rows):
    unit = {"tokens_per_s_per_gpu": "tokens/s/GPU", "tflops_per_gpu": "TFLOP/s/GPU",
            "tflops_per_gpu_sc21": "TFLOP/s/GPU (with recompute)"}
    out = ["| run | GPUs | layout | published | predicted | error | memory published | memory predicted | "
           "memory error | held-out error | verdict | source |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        pred = "-" if r["predicted"] is None else f"{r['predicted']:,.1f}"
        mp = "-" if r["memory_published"] is None else f"{r['memory_published']:.1f} GiB"
        mm = "-" if r["memory_predicted"] is None else f"{r['memory_predicted']:.1f} GiB"
        name = r["file"] + (" (fitted)" if r["fitted"] else "") + (" (open miss)" if r["open_miss"] else "")
        out.append(f"| `{name}` | {r['gpus']:,} | {r['layout']} | {r['published']:,} {unit[r['metric']]} | {pred} | "
                   f"{fmt_err(r['error'])} | {mp} | {mm} | {fmt_err(r['memory_error'])} | "
                   f"{fmt_err(r['held_error'])} | {r['verdict']} | {r['source']} |")
    errs = [abs(r["error"]) for r in rows if r["error"] is not None]
    within = sum(1 for e in errs if e <= THROUGHPUT_BAND_PCT)
    out.append("")
    out.append(f"{within} of {len(rows)} runs within ±15 % throughput; median |error| "
               f"{sorted(errs)[len(errs) // 2]:.1f} %, largest {max(errs):.1f} %." if errs else "no run predicted")
    held = [abs(r["held_error"]) for r in rows if r.get("held_error") is not None]
    if held:
        out.append(f"Held out (each source predicted with the parameters fitted without it): "
                   f"{sum(1 for e in held if e <= THROUGHPUT_BAND_PCT)} of {len(held)} runs within ±15 % throughput; "
                   f"median |error| {sorted(held)[len(held) // 2]:.1f} %, largest {max(held):.1f} %"
                   + (f"; {len(rows) - len(held)} without a held-out prediction" if len(held) < len(rows) else "")
                   + ".")
    mem = [abs(r["memory_error"]) for r in rows if r["memory_error"] is not None]
    if mem:
        out.append(f"{sum(1 for e in mem if e <= 10.0)} of {len(mem)} published peaks within ±10 % memory "
                   f"(predicted: what the caching allocator reserves); largest |error| {max(mem):.1f} %.")
    notes = sorted({r["held_note"] for r in rows if r.get("held_note")})
    if notes:
        out.append("")
        out.append("Refits for the held-out column: " + "; ".join(notes) + ".")
    misses = [r for r in rows if r["open_miss"]]
    if misses:
        out.append("")
        out.append("Open misses (outside a band for a reason the model does not capture yet):")
        out.append("")
        for r in misses:
            out.append(f"- `{r['file']}`: {r['open_miss']}")
    return "\n".join(out) + "\n"


BANDS_HEADER = os.path.join(ROOT, "src", "model", "fidelity_bands.h")


def framework_of(file):
    return {".toml": "torchtitan", ".sh": "megatron", ".json": "deepspeed"}.get(os.path.splitext(file)[1], "other")


def bands_header(rows):
    """The C++ header of the throughput error band per framework (what reports quote): the held-out
    error of each run (predicted with the parameters fitted without its source), its fitted error
    where it has none."""
    by, mem = {}, {}
    for r in rows:
        e = r.get("held_error") if r.get("held_error") is not None else r["error"]
        if e is not None:
            by.setdefault(framework_of(r["file"]), []).append(e)
        if r.get("memory_error") is not None:
            mem.setdefault(framework_of(r["file"]), []).append(r["memory_error"])
    lines = [
        "// Generated by scripts/fidelity.py --write docs/fidelity.md (do not edit): per framework, how far",
        "// the predicted throughput (held out: each source predicted with the parameters fitted without it)",
        "// and memory of the published runs in specs/reference/published/ lie from the published figures",
        "// (docs/fidelity.md). Reports quote it beside a prediction; a test keeps it equal to what the binary",
        "// predicts.",
        "#pragma once",
        "",
        "#include <cstring>",
        "",
        "namespace sc::model {",
        "",
        "/// The band of one framework's runs: `runs` runs, throughput errors (predicted / published - 1)",
        "/// from `min_error_pct` to `max_error_pct` percent; `memory_runs` of them publish a peak, whose",
        "/// predicted reserve lies `memory_min_error_pct` to `memory_max_error_pct` percent from it (0 runs:",
        "/// no band).",
        "struct FidelityBand {",
        "  const char* framework;",
        "  int runs;",
        "  double min_error_pct, max_error_pct;",
        "  int memory_runs;",
        "  double memory_min_error_pct, memory_max_error_pct;",
        "};",
        "",
        "inline constexpr FidelityBand kFidelityBands[] = {",
    ]
    for fw in sorted(by):
        e = by[fw]
        m = mem.get(fw, [])
        lines.append(f'    {{"{fw}", {len(e)}, {min(e):.1f}, {max(e):.1f}, {len(m)}, '
                     f'{min(m) if m else 0:.1f}, {max(m) if m else 0:.1f}}},')
    lines += [
        "};",
        "",
        "/// The band of `framework` (\"torchtitan\", \"megatron\", \"deepspeed\"), or null when no",
        "/// published run of it is checked.",
        "inline const FidelityBand* fidelity_band(const char* framework) {",
        "  for (const FidelityBand& b : kFidelityBands)",
        "    if (std::strcmp(b.framework, framework) == 0) return &b;",
        "  return nullptr;",
        "}",
        "",
        "}  // namespace sc::model",
        "",
    ]
    return "\n".join(lines)


def parse_errors(text):
    """{file: (error, memory error, held-out error)} from a committed table."""
    got = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = cells[0].strip("`").replace(" (fitted)", "").replace(" (open miss)", "")
        num = lambda c: None if c == "-" else float(c.replace(" %", ""))
        got[name] = (num(cells[5]), num(cells[8]), num(cells[9]))
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "schedcheck"))
    ap.add_argument("--write", metavar="DOC")
    ap.add_argument("--check", metavar="DOC")
    a = ap.parse_args()
    rows = measure(a.binary)
    t = table(rows)
    if a.check:
        doc = open(a.check, encoding="utf-8").read()
        if BEGIN not in doc or END not in doc:
            sys.exit(f"{a.check}: no fidelity table markers")
        committed = parse_errors(doc[doc.index(BEGIN):doc.index(END)])
        bad = []
        for r in rows:
            old = committed.get(r["file"])
            if old is None:
                bad.append(f"{r['file']}: not in the committed table")
                continue
            for what, new, was in (("throughput", r["error"], old[0]), ("memory", r["memory_error"], old[1]),
                                   ("held-out throughput", r["held_error"], old[2])):
                if (new is None) != (was is None) or (new is not None and abs(new - was) > TOLERANCE_PP):
                    bad.append(f"{r['file']}: {what} error {fmt_err(new)} now, {fmt_err(was)} in {a.check}")
        # Every run within the band the model must reach: ±15 % throughput, fitted and held out,
        # and, where the run publishes its memory, ±10 % memory.
        for r in rows:
            outside = []
            if r["error"] is None:
                bad.append(f"{r['file']}: no prediction ({r['note'] or r['verdict']})")
            elif abs(r["error"]) > THROUGHPUT_BAND_PCT:
                outside.append(f"throughput error {fmt_err(r['error'])}, outside ±{THROUGHPUT_BAND_PCT:g} %")
            if r["held_error"] is not None and abs(r["held_error"]) > THROUGHPUT_BAND_PCT:
                outside.append(f"held-out throughput error {fmt_err(r['held_error'])}, outside ±{THROUGHPUT_BAND_PCT:g} %")
            if r["memory_error"] is not None and abs(r["memory_error"]) > MEMORY_BAND_PCT:
                outside.append(f"memory error {fmt_err(r['memory_error'])}, outside ±{MEMORY_BAND_PCT:g} %")
            if outside and not r["open_miss"]:
                bad.extend(f"{r['file']}: {o}" for o in outside)
            if r["open_miss"] and r["error"] is not None and not outside:
                bad.append(f"{r['file']}: within its bands now; remove its open_miss from runs.toml")
        # The bands the binary quotes were generated from the same table.
        header = open(BANDS_HEADER, encoding="utf-8").read() if os.path.exists(BANDS_HEADER) else ""
        committed_rows = [{"file": f, "error": e[0], "memory_error": e[1], "held_error": e[2]}
                          for f, e in committed.items()]
        if header != bands_header(committed_rows):
            bad.append(f"{os.path.relpath(BANDS_HEADER, ROOT)}: not the bands of {a.check}")
        if bad:
            print("\n".join(bad))
            print(f"fidelity: {len(bad)} problem(s): a figure that moved needs scripts/fidelity.py --write {a.check} "
                  "and a word on why; a run outside its band needs the model fixed")
            sys.exit(1)
        print(f"fidelity: {len(rows)} runs as committed in {a.check}")
        return
    if a.write:
        doc = open(a.write, encoding="utf-8").read()
        if BEGIN not in doc or END not in doc:
            sys.exit(f"{a.write}: no fidelity table markers")
        doc = doc[:doc.index(BEGIN) + len(BEGIN)] + "\n\n" + t + "\n" + doc[doc.index(END):]
        tmp = a.write + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(doc)
        os.replace(tmp, a.write)
        # The bands from the table as written (rounded as it shows them), for the reports.
        written = parse_errors(doc[doc.index(BEGIN):doc.index(END)])
        tmp = BANDS_HEADER + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(bands_header([{"file": k, "error": v[0], "memory_error": v[1], "held_error": v[2]}
                                  for k, v in written.items()]))
        os.replace(tmp, BANDS_HEADER)
    print(t, end="")


if __name__ == "__main__":
    main()
