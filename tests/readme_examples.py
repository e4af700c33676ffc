#!/usr/bin/env python3
"""The README's example outputs against the binary: every block of README.md that shows a
command and what it prints is either run and compared, or marked as not machine-checked with
the reason.

Convention (README.md, an HTML comment on the line before the block's opening fence):

    <!-- readme-test: ARGS [| exit=N] [| elide=A-B,C-D] -->
        the block's first line is `$ attn-doctor ARGS`; the rest is what
        `attn-doctor ARGS` prints (stdout and stderr as one stream, NO_COLOR=1, COLUMNS
        unset, run from the repository root), with the output lines A..B (1-based,
        inclusive; `A-`: to the last line) each shown as one line `  ...`; the exit code
        must be N (default 0).
    <!-- readme-test: skip REASON -->
        not run (REASON says why: it needs torch, a GPU, ...).

Timings ("0.18 ms") vary from run to run: they are compared as "N ms". A fenced block whose
first line starts with `$ ` and has no marker fails the test, as does a README without any
checked block. The expected text is the README itself: nothing here holds a copy.

    python3 tests/readme_examples.py --binary build/attn-doctor            # compare
    python3 tests/readme_examples.py --binary build/attn-doctor --update   # rewrite the blocks
"""
import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
TIMING = re.compile(r"\b\d+(?:\.\d+)? ms\b")
ELIDED = "  ..."


class Block:
    def __init__(self, marker_line, fence_line, end_line, spec, lines):
        self.marker_line, self.fence_line, self.end_line = marker_line, fence_line, end_line
        self.spec, self.lines = spec, lines  # lines: the block's content, without the fences


def parse_spec(text, where):
    """'check FILE | exit=1 | elide=3-5' -> dict(args=..., exit=1, elide=[(3, 5)]), or skip."""
    if text.startswith("skip"):
        reason = text[4:].strip()
        if not reason:
            raise SystemExit(f"{where}: `readme-test: skip` needs a reason")
        return {"skip": reason}
    parts = [p.strip() for p in text.split("|")]
    spec = {"args": parts[0], "exit": 0, "elide": []}
    if not spec["args"]:
        raise SystemExit(f"{where}: `readme-test:` names no arguments")
    for p in parts[1:]:
        key, _, value = p.partition("=")
        if key == "exit" and value.isdigit():
            spec["exit"] = int(value)
        elif key == "elide" and value:
            for r in value.split(","):
                a, dash, b = r.partition("-")
                end = b if b else ("0" if dash else a)  # "A-": to the last line
                if not (a.isdigit() and end.isdigit()) or int(a) < 1 or (end != "0" and int(a) > int(end)):
                    raise SystemExit(f"{where}: bad range {r!r} in elide=")
                spec["elide"].append((int(a), int(end) or None))
        else:
            raise SystemExit(f"{where}: unknown option {p!r} (exit=N, elide=A-B,...)")
    return spec


def find_blocks(lines):
    """Every fenced block with its marker (None when it has none)."""
    blocks, i, pending = [], 0, None
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            pending = (i, parse_spec(m.group(1), f"README.md:{i + 1}"))
            i += 1
            continue
        if lines[i].startswith("```"):
            start = i
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            if i >= len(lines):
                raise SystemExit(f"README.md:{start + 1}: unclosed fence")
            marker_line, spec = pending if pending and pending[0] == start - 1 else (None, None)
            if pending and pending[0] != start - 1:
                raise SystemExit(f"README.md:{pending[0] + 1}: a readme-test marker must be on the line before a fence")
            blocks.append(Block(marker_line, start, i, spec, lines[start + 1:i]))
            pending = None
        elif pending and lines[i].strip():
            raise SystemExit(f"README.md:{pending[0] + 1}: a readme-test marker must be on the line before a fence")
        i += 1
    return blocks


def run(binary, spec):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    env["NO_COLOR"] = "1"
    p = subprocess.run([binary] + shlex.split(spec["args"]), cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    out = p.stdout.decode("utf-8", "replace").splitlines()
    shown, k = [], 0
    for a, b in sorted(spec["elide"]):
        b = len(out) if b is None else b
        if a > len(out) or b > len(out):
            raise SystemExit(f"elide={a}-{b} for `attn-doctor {spec['args']}` is past its {len(out)} lines of output")
        shown += out[k:a - 1] + [ELIDED]
        k = b
    shown += out[k:]
    return p.returncode, [line.rstrip() for line in shown]


def normalise(lines):
    return [TIMING.sub("N ms", line.rstrip()) for line in lines]


def marker_text(spec, rc):
    text = spec["args"]
    if rc:
        text += f" | exit={rc}"
    if spec["elide"]:
        text += " | elide=" + ",".join(f"{a}-" if b is None else f"{a}-{b}" if a != b else f"{a}" for a, b in spec["elide"])
    return f"<!-- readme-test: {text} -->"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True, help="the attn-doctor binary to run")
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--update", action="store_true", help="rewrite each checked block from a real run")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    with open(args.readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = find_blocks(lines)
    failures, checked, skipped = [], 0, 0
    replacements = []  # (first line, last line, new lines)
    for b in blocks:
        where = f"README.md:{b.fence_line + 1}"
        if b.spec is None:
            if b.lines and b.lines[0].startswith("$ "):
                failures.append(f"{where}: a block showing a command has no readme-test marker "
                                "(`<!-- readme-test: ARGS -->`, or `<!-- readme-test: skip REASON -->`)")
            continue
        if "skip" in b.spec:
            skipped += 1
            continue
        checked += 1
        command = "$ attn-doctor " + b.spec["args"]
        rc, out = run(binary, b.spec)
        if args.update:
            replacements.append((b.marker_line, b.end_line - 1, [marker_text(b.spec, rc), lines[b.fence_line], command] + out))
            continue
        if not b.lines or b.lines[0].rstrip() != command:
            failures.append(f"{where}: the block's first line should be `{command}` (the marker's command)")
            continue
        if rc != b.spec["exit"]:
            failures.append(f"{where}: `attn-doctor {b.spec['args']}` exited {rc}, the README says {b.spec['exit']}")
        want, got = normalise(b.lines[1:]), normalise(out)
        if want != got:
            diff = "\n".join(difflib.unified_diff(want, got, "README.md", "attn-doctor " + b.spec["args"], lineterm=""))
            failures.append(f"{where}: the output differs from the README (run with --update to rewrite it):\n{diff}")
    if args.update:
        for first, last, new in reversed(replacements):
            lines[first:last + 1] = new
        with open(args.readme, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"readme-examples: rewrote {len(replacements)} blocks of {args.readme}")
        return 0
    if checked == 0:
        failures.append("README.md has no `<!-- readme-test: ARGS -->` block: nothing was checked")
    for f in failures:
        print(f, file=sys.stderr)
    print(f"readme-examples: {checked} blocks run, {skipped} marked not machine-checked, {len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
