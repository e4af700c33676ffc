#!/usr/bin/env python3
"""Tables of README.md from ncu_raw.csv (`ncu --import fwd.ncu-rep --page raw --csv`): per kernel,
duration, SM and tensor-pipe throughput, issue-slot use, warps, instructions, the top stall
reasons (warps stalled per issued instruction), and the per-tile fit of SM cycles.

    python3 summarize.py ncu_raw.csv
"""
import csv
import sys

rows = list(csv.reader(open(sys.argv[1] if len(sys.argv) > 1 else "ncu_raw.csv")))
hdr = rows[0]
ix = {h: i for i, h in enumerate(hdr)}
NVTX = next(h for h in hdr if h.startswith("thread Domain:Push/Pop_Range"))


def g(r, k):
    v = r[ix[k]].replace(",", "")
    try:
        return float(v)
    except ValueError:
        return v


stalls = [h for h in hdr if h.startswith("smsp__average_warps_issue_stalled_") and h.endswith("_per_issue_active.ratio")]
print("| batch (H = 32, d128, bf16) | variant | kernel | grid | duration us | SM % | tensor pipe % (active) | issue slots % | "
      "warps / SM | instructions M | LSU / XU / uniform pipe % | top stalls (warps per issued instruction) |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
per_cta = {}
for r in rows[2:]:
    rng = r[ix[NVTX]].split(":")[1] if ":" in r[ix[NVTX]] else ""
    batch, variant = rng.rsplit(" ", 1)
    name = r[ix["Kernel Name"]]
    kern = ("first launch" if variant == "checked" else "ws") if "wgmma_ws" in name else \
        "second launch" if "fallback" in name else "cuDNN" if "cudnn" in name else name[:40]
    st = sorted(((g(r, h), h[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")]) for h in stalls),
                reverse=True)
    top = ", ".join(f"{n} {v:.2f}" for v, n in st if n not in ("selected",))
    top = ", ".join(top.split(", ")[:4])
    pipes = "/".join(f"{g(r, 'sm__inst_executed_pipe_' + p + '.avg.pct_of_peak_sustained_active'):.1f}" for p in ("lsu", "xu", "uniform"))
    print(f"| {batch} | {variant} | {kern} | {r[ix['Grid Size']].replace(', ', 'x').strip('()')} | "
          f"{g(r, 'gpu__time_duration.sum') * 1000:.1f} | {g(r, 'sm__throughput.avg.pct_of_peak_sustained_elapsed'):.1f} | "
          f"{g(r, 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active'):.1f} | "
          f"{g(r, 'smsp__issue_active.avg.pct_of_peak_sustained_active'):.1f} | {g(r, 'sm__warps_active.avg.per_cycle_active'):.1f} | "
          f"{g(r, 'inst_executed') / 1e6:.1f} | {pipes} | {top} |")
    if "fallback" not in name:
        per_cta[(batch, variant)] = g(r, "sm__cycles_active.avg")

# SM cycles per 128-row query tile: 8192 tiles over 132 SMs; tiles of 16 (L = 2048) and 64 (L = 8192)
# key tiles (non-causal). A straight line through the two: fixed cycles per query tile + cycles per key tile.
print()
print("| variant | cycles per query tile, 16 x 2048 | 4 x 8192 | per key tile (slope) | fixed per query tile |")
print("|---|---:|---:|---:|---:|")
for v in ("unchecked", "checked", "cudnn"):
    a = per_cta[("16x2048", v)] / (8192 / 132)
    b = per_cta[("4x8192", v)] / (8192 / 132)
    slope = (b - a) / 48
    print(f"| {v} | {a / 1e3:.1f}k | {b / 1e3:.1f}k | {slope / 1e3:.2f}k | {(a - 16 * slope) / 1e3:.1f}k |")
