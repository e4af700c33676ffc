#!/usr/bin/env python3
"""Where one kernel's warps stall, from ncu's per-instruction source counters.

Reads the CSV of `ncu --import REPORT --page source --print-source sass --csv` (a report taken
with the SourceCounters section, e.g. `--set full`; plain or gzipped) and prints:

- the warp-stall samples by reason, over the kernel and over the instructions executed N times
  (--per N: e.g. 8 compute warps x steps x CTAs, to isolate a warp-specialised kernel's
  compute loop from its producer's, whose instructions run a different number of times);
- the samples by opcode and by execution count;
- the shared-memory instructions that take more wavefronts than the ideal (bank conflicts),
  by SASS opcode with its modifiers;
- the --top instructions by samples, with their main reason and shared-memory wavefronts
  against the ideal.

Usage:
  python3 bench/gpu/ncu_sass_stalls.py SASS.csv[.gz] [--per N] [--top 30]
"""
import argparse
import collections
import csv
import gzip
import io

SAMPLES = "Warp Stall Sampling (All Samples)"
EXEC = "Instructions Executed"


def read(path):
    raw = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    rows = list(csv.reader(io.StringIO(raw.read())))
    head = next(i for i, r in enumerate(rows) if "Address" in r and "Source" in r)
    cols = {h: i for i, h in enumerate(rows[head])}
    return cols, [r for r in rows[head + 1:] if len(r) == len(cols)]


def num(row, cols, key):
    try:
        return float(row[cols[key]].replace(",", "")) if key in cols else 0.0
    except ValueError:
        return 0.0


def mnemonic(src):
    """The instruction's opcode with its modifiers (STS.64), its predicate left out."""
    words = [w for w in src.split() if not w.startswith("@")]
    return words[0] if words else ""


def opcode(src):
    return mnemonic(src).split(".")[0]


def reasons_of(rows, cols, reasons):
    totals = {k: sum(num(r, cols, k) for r in rows) for k in reasons}
    whole = sum(totals.values()) or 1.0
    return ", ".join("%s %.1f%%" % (k[6:], 100 * v / whole) for k, v in sorted(totals.items(), key=lambda x: -x[1])[:8])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--per", type=float, help="also the instructions executed exactly this many times")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    cols, rows = read(args.csv)
    reasons = [h for h in cols if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(r, cols, SAMPLES) for r in rows) or 1.0
    print("%d instructions, %d warp-stall samples" % (len(rows), total))
    print("reasons, whole kernel: " + reasons_of(rows, cols, reasons))
    if args.per:
        part = [r for r in rows if num(r, cols, EXEC) == args.per]
        share = sum(num(r, cols, SAMPLES) for r in part)
        print("instructions executed %d times: %d instructions, %.1f%% of the samples; reasons: %s"
              % (args.per, len(part), 100 * share / total, reasons_of(part, cols, reasons)))
    by_op, by_exec, execs = collections.Counter(), collections.Counter(), collections.Counter()
    for r in rows:
        s = num(r, cols, SAMPLES)
        by_op[opcode(r[cols["Source"]])] += s
        execs[opcode(r[cols["Source"]])] += num(r, cols, EXEC)
        by_exec[num(r, cols, EXEC)] += s
    print("\nby opcode: samples, warp instructions executed")
    for op, s in by_op.most_common(15):
        print("  %-12s %5.1f%%  %12d" % (op, 100 * s / total, execs[op]))
    print("\nby execution count: samples")
    for n, s in by_exec.most_common(8):
        print("  %12d  %5.1f%%" % (n, 100 * s / total))
    over = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # count, wavefronts, ideal, samples
    for r in rows:
        wav, ideal = num(r, cols, "L1 Wavefronts Shared"), num(r, cols, "L1 Wavefronts Shared Ideal")
        if wav > ideal > 0:
            o = over[mnemonic(r[cols["Source"]])]
            o[0] += 1
            o[1] += wav
            o[2] += ideal
            o[3] += num(r, cols, SAMPLES)
    print("\nshared-memory instructions over their ideal wavefronts: instructions, wavefronts / ideal, samples")
    for op, (n, wav, ideal, s) in sorted(over.items(), key=lambda x: -x[1][3]):
        print("  %-14s %4d  %.2fx  %5.1f%%" % (op, n, wav / ideal, 100 * s / total))
    print("\ntop instructions: index, samples, main reason, executed, shared wavefronts / ideal, SASS")
    top = sorted(range(len(rows)), key=lambda i: -num(rows[i], cols, SAMPLES))[:args.top]
    for i in sorted(top):
        r = rows[i]
        main_reason = max(reasons, key=lambda k: num(r, cols, k))[6:] if reasons else ""
        wav, ideal = num(r, cols, "L1 Wavefronts Shared"), num(r, cols, "L1 Wavefronts Shared Ideal")
        shared = "%d / %d" % (wav, ideal) if wav else "-"
        print("  %5d %5.1f%% %-16s %10d %-20s %s" % (i, 100 * num(r, cols, SAMPLES) / total, main_reason,
                                                    num(r, cols, EXEC), shared, r[cols["Source"]].strip()[:64]))


if __name__ == "__main__":
    main()
