#!/usr/bin/env python3
"""Runs every `$ schedcheck ...` command block of the README and docs/ and compares its output.

A command block is a fenced code block whose first line starts with `$ ` and one of whose `$ `
lines runs schedcheck. Each `$ ` line is a command; the lines after it, up to the next `$ ` line,
are what the command prints (stdout and stderr together). Every block runs in its own temporary
copy of the repository (build folders and hidden entries left out), its commands in order with
bash in that copy's root (so a block may write a file and read it back), and a command that writes a
file (`-o dualpipev.csv`, `--svg out.svg`) never touches the checkout; `schedcheck` is the binary
given by --binary (first on PATH); `$?` is the exit status of the block's previous command.

  scripts/doc_blocks.py [--binary build/schedcheck] --check    exit 1 when any block's output
                                                                differs from the doc; prints a
                                                                unified diff per block, FILE:LINE
  scripts/doc_blocks.py [--binary build/schedcheck] --write    rewrite the output lines of every
                                                                block from the binary (each file
                                                                atomically), keeping its elisions
  scripts/doc_blocks.py ... [FILE.md ...]                       only these files (default: README.md
                                                                and docs/**/*.md)

How a doc line matches an output line:
  - a line that is only `...` (indentation allowed) stands for any number of lines, none included;
  - `...` inside a line stands for any text within that line;
  - trailing blanks are ignored;
  - timing figures are masked on both sides (MASKS below): wall-clock seconds where the binary
    reports how long it took: the plan header's `(5.0 s)`, a router property's `7 queries, 0.04 s`,
    synth's `solver 0.000 s` and numerics' `after 3 checks in 0.52 s`. Every other figure, modelled
    times included (`span 66 s`), must match digit for digit.

A block the machine cannot run (a GPU-only command) is marked in the markdown on the line before
its fence with `<!-- doc-blocks: skip (REASON) -->`; it is reported as skipped with its reason.
A block taking more than SLOW_S seconds is reported as slow.

A block that quotes a file of the repository (a workflow step) is marked on the line before its
fence with `<!-- doc-blocks: excerpt of PATH -->` (PATH relative to the markdown file); its
lines, without their common indentation, must be consecutive lines of PATH (trailing blanks
ignored), so the quotation cannot drift from the file. --write reports a drifted excerpt and
leaves it to be edited.

Prose figures: the paragraph right after a command block (the first after it, up to a blank line)
often quotes what the block printed ("throughput is 9.95 % lower"). Every figure in it with a
decimal point, a unit of its own (%, pp, GiB, MiB, ms, s, x) or two digits or more must appear in the block's output
or command lines, up to its sign, the blank before its unit and rounding (0.80 for a printed
0.7998); otherwise the check fails with the figure and its line. A figure that is not the block's (a published number, a threshold) is
kept out of the check by quoting it in backticks. Exit codes ("exit 13"), references ("#147168")
and a paragraph that ends with a colon (it introduces the next block) are not checked.

--write keeps a doc line whose masked text still matches (so timing figures do not churn), keeps
every `...` line and re-elides a line with `...` inside when the new line has the same shape;
lines it could not place are reported. Review the result with `git diff` like code. An excerpt
ends with a `...` line when the command prints more after it: without one, --write takes the doc's
last lines for lines no longer printed and the output's later lines for new ones.
"""
import argparse
import difflib
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
SKIP_RE = re.compile(r"^\s*<!--\s*doc-blocks:\s*skip\s*\((.*)\)\s*-->\s*$")
EXCERPT_RE = re.compile(r"^\s*<!--\s*doc-blocks:\s*excerpt of\s+(\S+)\s*-->\s*$")
ELLIPSIS = "..."
SLOW_S = 20.0
TIMEOUT_S = 300

NUM = r"[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?"
# Each mask: (what it is, pattern whose group 1 is the wall-clock figure to replace by '#').
MASKS = [
    ("plan: search time in the header", re.compile(r"verified, \d+ holds? \((" + NUM + r" s)\)")),
    ("router: solver time of a property", re.compile(r"quer(?:y|ies), (" + NUM + r" s)")),
    ("synth: solver time in the stats line", re.compile(r"\bsolver (" + NUM + r" s)\b")),
    ("numerics: Z3 time of the worst-case proof", re.compile(r"\bchecks? in (" + NUM + r" s)\b")),
]


def mask(line):
    line = line.rstrip()
    for _, rx in MASKS:
        line = rx.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + "#" + m.group(0)[m.end(1) - m.start(0):], line)
    return line


def is_elision(line):
    return line.strip() == ELLIPSIS


def line_regex(doc_line):
    parts = mask(doc_line).split(ELLIPSIS)
    return re.compile(".*?".join(re.escape(p) for p in parts) + r"\Z")


def line_matches(doc_line, out_line):
    if ELLIPSIS in doc_line:
        return line_regex(doc_line).match(mask(out_line)) is not None
    return mask(doc_line) == mask(out_line)


def matches(doc, out):
    """Whether the doc lines (with elisions) match the output lines exactly."""
    memo = {}

    def go(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(doc):
            r = j == len(out)
        elif is_elision(doc[i]):
            r = any(go(i + 1, k) for k in range(j, len(out) + 1))
        else:
            r = j < len(out) and line_matches(doc[i], out[j]) and go(i + 1, j + 1)
        memo[key] = r
        return r

    sys.setrecursionlimit(max(10000, 4 * (len(doc) + len(out))))
    return go(0, 0)


def shape(line):
    return re.sub(NUM, "0", mask(line)).strip()


def reelide(doc_line, out_line):
    """out_line elided where doc_line has `...` inside it, or None when their shapes differ."""
    parts = mask(doc_line).split(ELLIPSIS)
    rx = "(.*?)".join("(" + re.sub(r"0", NUM, re.escape(re.sub(NUM, "0", p))) + ")" for p in parts)
    m = re.compile(rx + r"\Z").match(out_line.rstrip())
    if not m:
        return None
    groups = m.groups()
    return ELLIPSIS.join(groups[k] for k in range(0, len(groups), 2))


def render(doc, out):
    """The doc lines rewritten from the output: (new lines, notes). Aligns doc and output lines by
    similarity (an elision absorbs any output lines at no cost), keeps matching doc lines as they
    are, replaces the others by the output's line and inserts output lines no doc line covers."""
    n, m = len(doc), len(out)
    INF = float("inf")
    cost = [[INF] * (m + 1) for _ in range(n + 1)]
    move = [[None] * (m + 1) for _ in range(n + 1)]
    cost[n][m] = 0.0
    shapes_out = [shape(o) for o in out]
    for i in range(n, -1, -1):
        for j in range(m, -1, -1):
            if i == n and j == m:
                continue
            best, how = INF, None
            if i < n and is_elision(doc[i]):
                # the elision covers out[j:k]
                for k in range(j, m + 1):
                    if cost[i + 1][k] < best:
                        best, how = cost[i + 1][k], ("elide", k)
            else:
                if i < n and j < m:
                    if line_matches(doc[i], out[j]):
                        c = 0.0
                    else:
                        # a line that changed a little replaces its doc line; an unrelated one is
                        # better dropped and inserted (cost 2)
                        r = difflib.SequenceMatcher(None, shape(doc[i]), shapes_out[j], autojunk=False).ratio()
                        c = 0.1 + 0.9 * (1.0 - r) if r >= 0.6 else 2.5
                    if c + cost[i + 1][j + 1] < best:
                        best, how = c + cost[i + 1][j + 1], ("pair", None)
                if i < n and 1.0 + cost[i + 1][j] < best:
                    best, how = 1.0 + cost[i + 1][j], ("drop", None)
                if j < m and 1.0 + cost[i][j + 1] < best:
                    best, how = 1.0 + cost[i][j + 1], ("insert", None)
            cost[i][j], move[i][j] = best, how
    new, notes, i, j = [], [], 0, 0
    while (i, j) != (n, m):
        how, arg = move[i][j]
        if how == "elide":
            new.append(doc[i])
            i, j = i + 1, arg
        elif how == "pair":
            if line_matches(doc[i], out[j]):
                new.append(doc[i])
            elif ELLIPSIS in doc[i]:
                again = reelide(doc[i], out[j])
                if again is None:
                    notes.append(f"a line elided inside no longer has its shape, written in full: {out[j]!r}")
                    new.append(out[j].rstrip())
                else:
                    new.append(again)
            else:
                new.append(out[j].rstrip())
            i, j = i + 1, j + 1
        elif how == "drop":
            notes.append(f"doc line no longer printed, removed: {doc[i]!r}")
            i += 1
        else:
            new.append(out[j].rstrip())
            j += 1
    return new, notes


class Block:
    """A command block: its file, the 1-based line of its opening fence (its body starts on the
    next line, index fence_line in the file's 0-based lines), its body lines and the reason it is
    skipped (None when it runs)."""

    def __init__(self, path, fence_line, body, skip):
        self.path, self.fence_line, self.body, self.skip = path, fence_line, body, skip
        self.body_start = fence_line
        self.commands = []  # (index in body, command text, expected lines)
        cur = None
        for k, line in enumerate(body):
            if line.startswith("$ "):
                cur = (k, line[2:], [])
                self.commands.append(cur)
            elif cur is not None:
                cur[2].append(line)

    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.fence_line}"


def fenced_blocks(lines):
    """(index of the fence line, body lines, the nearest non-blank line before the fence or "")
    of every fenced code block in `lines`."""
    i = 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(m.group(2)):
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        yield i, lines[i + 1:j], lines[k] if k >= 0 else ""
        i = j + 1


def find_excerpts(path):
    """[(line of the fence, PATH as written, body lines)] of the blocks marked as excerpts."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    return [(i + 1, em.group(1), body) for i, body, before in fenced_blocks(lines)
            if (em := EXCERPT_RE.match(before))]


def excerpt_problem(md_path, target, body):
    """None when `body` is a run of consecutive lines of `target`, else what is wrong."""
    full = os.path.normpath(os.path.join(os.path.dirname(md_path), target))
    if not os.path.isfile(full):
        return f"the excerpt names {target}, which does not exist"
    def dedent(ls):
        ls = [x.rstrip() for x in ls]
        ind = min((len(x) - len(x.lstrip()) for x in ls if x.strip()), default=0)
        return [x[ind:] for x in ls]
    want = dedent(body)
    with open(full, encoding="utf-8") as f:
        have = [x.rstrip() for x in f.read().split("\n")]
    for start in range(len(have) - len(want) + 1):
        window = dedent(have[start:start + len(want)])
        if window == want:
            return None
    first = next((w for w in want if w.strip() and not any(w.strip() == h.strip() for h in have)), None)
    return f"not a run of consecutive lines of {target}" + (f"; no line of it reads {first.strip()!r}" if first else "")


def find_blocks(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    for i, body, before in fenced_blocks(lines):
        runs = any(b.startswith("$ ") and re.match(r"\s*(\S+=\S*\s+)*schedcheck\b", b[2:]) for b in body)
        if body and body[0].startswith("$ ") and runs:
            sm = SKIP_RE.match(before)
            blocks.append(Block(path, i + 1, body, sm.group(1) if sm else None))
    return blocks


FIGURE_RE = re.compile(r"(?<![\w.`#])[+\u2212-]?([0-9][0-9,]*(?:\.[0-9]+)?)(\s?)(%|pp|GiB|MiB|KiB|TiB|ms|s|x|×)?(?![\w.])")


def prose_after(lines, fence_index, body_len):
    """(1-based line, text) of the paragraph right after the block whose fence is at
    lines[fence_index] (0-based), body_len lines long (blank lines after the fence skipped); empty
    when a heading, fence, comment or table comes first."""
    k = fence_index + body_len + 2  # past the closing fence
    while k < len(lines) and not lines[k].strip():
        k += 1
    out = []
    while k < len(lines) and lines[k].strip() and not lines[k].lstrip().startswith(("#", "```", "~~~", "<!--", "|")):
        out.append((k + 1, lines[k]))
        k += 1
    return out


def figures(text):
    """The figures of `text` the prose check covers: (as written, number, unit). Code spans are
    left out."""
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"\b(exit|exits|PR|issue|pull request)\s+[0-9]+", "", text)  # exit codes and references
    found = []
    for m in FIGURE_RE.finditer(text):
        number, unit = m.group(1), m.group(3) or ""
        if "." not in number and not unit and len(number.replace(",", "")) < 2:
            continue  # a small count ("2 ranks"); counts from 10 up are figures ("17 layouts")
        if unit in ("s", "x", "×") and "." not in number:
            continue  # "4 s", "10x": rounded prose, not a printed figure
        found.append((m.group(0).strip(), number, unit))
    return found


PRINTED_RE = re.compile(r"(?<![0-9.])([0-9][0-9,]*(?:\.[0-9]+)?)(\s?)(%|pp|GiB|MiB|KiB|TiB|ms|s|x|×)?(?![0-9])")


def figure_printed(number, unit, haystack):
    """Whether number[unit] is in haystack (a block's output and commands) up to rounding: some
    printed figure with the same unit (or, for a bare number, any) that rounds to it at its
    decimals, a blank before the unit allowed ("0.80" stands for a printed 0.7998)."""
    decimals = len(number.split(".")[1]) if "." in number else 0
    want = float(number.replace(",", ""))
    for m in PRINTED_RE.finditer(haystack):
        if unit and (m.group(3) or "") != unit:
            continue
        got = float(m.group(1).replace(",", ""))
        if abs(round(got, decimals) - want) < 0.5 * 10 ** -(decimals + 3):
            return True
    return False


def stale_prose(lines, block, results):
    """[(line, figure)] of prose figures after `block` that its output does not print."""
    haystack = "\n".join(cmd for _, cmd, _ in block.commands) + "\n" + "\n".join(
        "\n".join(out) for _, out in results)
    haystack = haystack.replace("\u2212", "-")
    stale = []
    paragraph = prose_after(lines, block.fence_line - 1, len(block.body))
    if paragraph and paragraph[-1][1].rstrip().endswith(":"):
        return []  # it introduces the next block, whose own command it describes
    for line_no, text in paragraph:
        for written, number, unit in figures(text):
            if not figure_printed(number, unit, haystack):
                stale.append((line_no, written))
    return stale


def copy_repo(dest):
    def ignore(d, names):
        if os.path.abspath(d) == ROOT:
            return [x for x in names if x.startswith(".") or x.startswith("build") or x == "out"]
        return [x for x in names if x == "__pycache__"]
    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def run_block(block, binary, pristine):
    """[(command, output lines)] of the block, run in a fresh copy of the repository."""
    with tempfile.TemporaryDirectory(prefix="doc-blocks-") as tmp:
        work = os.path.join(tmp, "repo")
        shutil.copytree(pristine, work, symlinks=True)
        bindir = os.path.join(tmp, "bin")
        os.mkdir(bindir)
        os.symlink(binary, os.path.join(bindir, "schedcheck"))
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), LC_ALL="C.UTF-8")
        env.pop("NO_COLOR", None)
        results, rc = [], 0
        for _, cmd, _ in block.commands:
            try:
                p = subprocess.run(["bash", "-c", f"(exit {rc}); {cmd}"], cwd=work, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
                text, rc = p.stdout.decode("utf-8", "replace"), p.returncode
            except subprocess.TimeoutExpired:
                text, rc = f"(timed out after {TIMEOUT_S} s)\n", 124
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            results.append((cmd, lines))
        return results


def new_body(block, results):
    body, notes = [], []
    for (_, cmd, expected), (_, out) in zip(block.commands, results):
        body.append("$ " + cmd)
        lines, why = render(expected, out)
        body.extend(lines)
        notes.extend(why)
    return body, notes


def write_atomically(path, text):
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, os.stat(path).st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "schedcheck"))
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        sys.exit(f"doc_blocks.py: {args.binary}: no such executable (build it: ./scripts/build.sh schedcheck)")
    files = [os.path.abspath(f) for f in args.files] or \
        [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))

    failed = ran = skipped = rewritten = 0
    total_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="doc-blocks-repo-") as pristine_parent:
        pristine = os.path.join(pristine_parent, "repo")
        copy_repo(pristine)
        for path in files:
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            changed = False
            for block in reversed(find_blocks(path)) if args.write else find_blocks(path):
                if block.skip is not None:
                    print(f"{block.where()}: skipped ({block.skip})")
                    skipped += 1
                    continue
                start = time.monotonic()
                results = run_block(block, binary, pristine)
                took = time.monotonic() - start
                ran += 1
                if took > SLOW_S:
                    print(f"{block.where()}: slow: {took:.0f} s")
                for line_no, written in stale_prose(lines, block, results):
                    failed += 1 if args.check else 0
                    print(f"{os.path.relpath(path, ROOT)}:{line_no}: prose figure {written!r} after the block at "
                          f"line {block.fence_line} is not in its output")
                ok = all(matches(exp, out) for (_, _, exp), (_, out) in zip(block.commands, results))
                if ok:
                    continue
                body, notes = new_body(block, results)
                if args.check:
                    failed += 1
                    print(f"{block.where()}: the output differs from the doc")
                    sys.stdout.writelines(difflib.unified_diff(
                        [b + "\n" for b in block.body], [b + "\n" for b in body],
                        f"{block.where()} (doc)", f"{block.where()} (binary)", n=2))
                else:
                    print(f"{block.where()}: rewritten")
                    rewritten += 1
                    lines[block.body_start:block.body_start + len(block.body)] = body
                    changed = True
                for note in notes:
                    print(f"{block.where()}: note: {note}")
            if changed:
                write_atomically(path, "\n".join(lines))
        for line, target, body in find_excerpts(path):
            problem = excerpt_problem(path, target, body)
            if problem:
                failed += 1 if args.check else 0
                print(f"{os.path.relpath(path, ROOT)}:{line}: excerpt: {problem}")
    took = time.monotonic() - total_start
    if args.check:
        print(f"doc_blocks.py: {ran} block(s) run, {failed} differ, {skipped} skipped, {took:.0f} s")
    else:
        print(f"doc_blocks.py: {ran} block(s) run, {rewritten} rewritten, {skipped} skipped, {took:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
