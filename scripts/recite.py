#!/usr/bin/env python3
"""Rewrites citations of two retired developer notes to the docs/facts/ pages that now hold them.

Older code cites "FACTS §n" (also "FACTS.md §n", "FACTS section n") and "CONFIGS.md §n.m" (also
"CONFIGS §n.m", lists such as "§1.4, §2.2-2.3" and citations broken over a comment line). Each
becomes the path (and, for a subsection, the anchor) of the page under docs/facts/ that states
the same fact with its primary source. Test names get the page without the anchor.

Usage: scripts/recite.py [--check] [PATH...]
  With no PATH, every file git tracks. Prints each change as file:line: old -> new.
  --check changes nothing and exits 1 when a citation (or a use of ../shared outside tests/ and
  CMake files) is left; tests/CMakeLists.txt runs it that way.
Re-running is harmless: a rewritten citation no longer matches.
"""
import os
import re
import subprocess
import sys

FACTS = {
    "1": "docs/facts/pipeline-schedules.md",
    "2": "docs/facts/p2p-semantics.md",
    "3": "docs/facts/fsdp-zero.md",
    "4": "docs/facts/moe-router.md",
    "5": "docs/facts/numerics.md",
    "6": "docs/facts/composed-runtime.md",
}

CONFIGS = {
    "1": "docs/facts/config-keys.md#torchtitan",
    "1.1": "docs/facts/config-keys.md#torchtitan-config-eras",
    "1.2": "docs/facts/config-keys.md#torchtitan-parallelism-keys",
    "1.3": "docs/facts/config-keys.md#torchtitan-training-keys",
    "1.4": "docs/facts/config-keys.md#torchtitan-validation-rules",
    "1.5": "docs/facts/config-keys.md#pipeline-schedule-names",
    "1.6": "docs/facts/config-keys.md#model-flavors",
    "1.7": "docs/facts/config-keys.md#shipped-torchtitan-configs",
    "2": "docs/facts/config-keys.md#megatron-lm",
    "2.1": "docs/facts/config-keys.md#megatron-flags",
    "2.2": "docs/facts/config-keys.md#megatron-derived-sizes",
    "2.3": "docs/facts/config-keys.md#megatron-startup-checks",
    "2.4": "docs/facts/config-keys.md#megatron-example-scripts",
    "3": "docs/facts/config-keys.md#deepspeed",
    "3.1": "docs/facts/config-keys.md#deepspeed-zero-keys",
    "3.2": "docs/facts/config-keys.md#deepspeed-batch-and-precision",
    "3.3": "docs/facts/config-keys.md#deepspeed-pipeline",
    "3.4": "docs/facts/cost-formulas.md#deepspeed-memory-estimators",
    "3.5": "docs/facts/config-keys.md#accelerate",
    "4": "docs/facts/cost-formulas.md",
    "4.1": "docs/facts/cost-formulas.md#flops",
    "4.2": "docs/facts/cost-formulas.md#parameter-counts",
    "4.3": "docs/facts/cost-formulas.md#activation-memory",
    "4.4": "docs/facts/cost-formulas.md#bytes-per-parameter",
    "4.5": "docs/facts/cost-formulas.md#per-rank-memory-with-sharding",
    "4.6": "docs/facts/cost-formulas.md#communication-volume-and-time",
    "4.7": "docs/facts/cost-formulas.md#pipeline-bubble",
    "5": "docs/facts/hardware.md",
    "5.1": "docs/facts/hardware.md#gpus",
    "5.2": "docs/facts/hardware.md#published-mfu",
    "6": "docs/facts/cost-formulas.md#planner-rules",
    "6.1": "docs/facts/cost-formulas.md#fsdp-crossover",
    "6.2": "docs/facts/cost-formulas.md#batch-size-bounds",
    "6.3": "docs/facts/cost-formulas.md#what-a-config-must-give",
    "7": "docs/facts/config-keys.md#pitfalls",
}

# Mentions that are not of the "§n" form, as (pattern, replacement).
PHRASES = [
    (re.compile(r"\bFACTS lists\b"), "docs/facts/pipeline-schedules.md lists"),
    (re.compile(r"the FACTS(\s*\n[ \t]*(?://+|#)?[ \t]*)table"), r"the\1docs/facts/pipeline-schedules.md table"),
    (re.compile(r"from CONFIGS\.md \(section given per entry\)"), "from a page of docs/facts/ (given per entry)"),
    (re.compile(r"\bCONFIGS\.md derives\b"), "docs/facts/cost-formulas.md derives"),
]

NL = r"[ \t]*\n[ \t]*(?://+!?|#|\*)?[ \t]*"  # a line break inside a comment, with its marker
REF = r"(?:§ ?|section )\d+(?:\.\d+)?(?:[-–]§?\d+(?:\.\d+)?)?"
SEP = r"(?:,|, | / | and | or |,?" + NL + r")"
CITE = re.compile(
    r"\b(?P<doc>FACTS|CONFIGS)(?:\.md)?(?P<first>(?: |" + NL + r"))(?P<refs>" + REF + r"(?:" + SEP + r"(?:§ ?)\d+(?:\.\d+)?(?:[-–]§?\d+(?:\.\d+)?)?)*)"
    r"(?P<tail>[),.;:]*)(?P<sp> ?)")
ONE = re.compile(r"(?:§ ?|section )?(\d+)(?:\.(\d+))?(?:[-–]§?(\d+)(?:\.(\d+))?)?")
LEFT = re.compile(r"\bFACTS\b|\bCONFIGS\.md\b|\bCONFIGS ?§")
SHARED = "../shared"


def expand(table, ref):
    """The keys of table a reference names: '2.2-2.3' -> ['2.2', '2.3'], '4-5' -> ['4', '5']."""
    m = ONE.fullmatch(ref.strip())
    a, a_sub, b, b_sub = m.groups()
    if b is None:
        return [a + ("." + a_sub if a_sub else "")]
    if a_sub is not None and b_sub is not None and a == b:
        return [f"{a}.{i}" for i in range(int(a_sub), int(b_sub) + 1)]
    if a_sub is None and b_sub is None:
        return [str(i) for i in range(int(a), int(b) + 1)]
    return [a + ("." + a_sub if a_sub else ""), b + ("." + b_sub if b_sub else "")]


def target(table, key):
    while key not in table and "." in key:  # an unknown subsection falls back to its section
        key = key.rsplit(".", 1)[0]
    if key not in table:
        raise KeyError(key)
    return table[key]


def join_targets(targets):
    """'p#a', 'p#b', 'q' -> 'p#a, #b, q': further anchors of one page are written as '#anchor'."""
    parts, last_page = [], None
    for t in targets:
        page, _, anchor = t.partition("#")
        parts.append("#" + anchor if anchor and page == last_page else t)
        last_page = page
    return ", ".join(parts)


def rewrite_match(m, in_test_name):
    table = FACTS if m.group("doc") == "FACTS" else CONFIGS
    refs = re.findall(REF, m.group("refs"))
    out = []
    for ref in refs:
        for key in expand(table, ref):
            t = target(table, key)
            if in_test_name:
                t = t.split("#")[0]
            if t not in out:
                out.append(t)
    text = join_targets(out)
    whole = m.group(0)
    if "\n" in whole:
        # Keep the line break: the citation and its punctuation end the first line, the comment
        # marker of the last line is kept for what followed.
        marker = re.search(r"\n([ \t]*(?://+!?|#|\*)?[ \t]*)[^\n]*$", whole).group(1)
        if not marker.endswith((" ", "\t")):
            marker += " "
        return text + m.group("tail") + "\n" + marker
    return text + m.group("tail") + m.group("sp")


def rewrite(text):
    changes = []
    for pat, rep in PHRASES:
        text = pat.sub(rep, text)

    def sub(m):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line = text[line_start:text.find("\n", m.start()) if "\n" in text[m.start():] else len(text)]
        return rewrite_match(m, "TEST_CASE(" in line or "SECTION(" in line)

    new = CITE.sub(sub, text)
    return new


def tracked_files(root):
    """The files git tracks; outside a git checkout, every file but build folders."""
    run = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True)
    if run.returncode == 0:
        return [p for p in run.stdout.decode().split("\0") if p]
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith((".git", "build"))]
        out += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return out


def is_text(path):
    try:
        with open(path, "rb") as f:
            return b"\0" not in f.read(8192)
    except OSError:
        return False


SELF = {"scripts/recite.py"}


def shared_allowed(path):
    """../shared may appear in CMake files (SCHEDCHECK_CORPUS_DIR) and in tests that read the corpus."""
    base = os.path.basename(path)
    return path.startswith("tests/") or base == "CMakeLists.txt" or base.endswith(".cmake")


def main(argv):
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = paths or tracked_files(root)
    changed, left = 0, []
    for rel in files:
        path = rel if paths else os.path.join(root, rel)
        name = os.path.relpath(path, root)
        if name in SELF or not os.path.isfile(path) or not is_text(path):
            continue
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            old = f.read()
        new = rewrite(old)
        if new != old:
            changed += 1
            old_lines, new_lines = old.split("\n"), new.split("\n")
            if len(old_lines) == len(new_lines):
                for i, (a, b) in enumerate(zip(old_lines, new_lines)):
                    if a != b:
                        print(f"{name}:{i + 1}: {a.strip()}\n    -> {b.strip()}")
            else:
                print(f"{name}: rewritten ({len(old_lines)} -> {len(new_lines)} lines)")
            if not check:
                with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                    f.write(new)
        final = old if check else new
        for i, line in enumerate(final.split("\n")):
            if LEFT.search(line):
                left.append(f"{name}:{i + 1}: cites a retired note: {line.strip()}")
            if SHARED in line and not shared_allowed(name):
                left.append(f"{name}:{i + 1}: uses {SHARED}: {line.strip()}")
    for l in left:
        print(l)
    verb = "would change" if check else "changed"
    print(f"recite: {verb} {changed} file(s); {len(left)} citation(s) or ../shared use(s) left")
    if check:
        return 1 if (changed or left) else 0
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
