"""Per-call cost of the guard (attn_doctor.guard): what a hooked varlen call costs more with the
guard installed than without, in microseconds, median and p99.

Two entry points, each over a stand-in that returns at once (so only the guard is timed):
  kernel         flash_attn.flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, ...):
                 q (total, H, D), B + 1 cu_seqlens entries
  transformers   transformers' _flash_attention_forward(q, k, v, attention_mask, ...):
                 q (B, L, H, D), a right-padded (B, L) mask (90 % of the rows' tokens real);
                 the guard replays the named release's unpadding of the whole mask
and three situations per call:
  new batch      index tensors (cu_seqlens / mask) never seen: described, checked by the
                 extension (the first layer of a forward)
  same batch     the same unmodified index tensors as the previous call: the cached verdict
                 (every later layer of that forward)
  no sync        sync=False with the index tensors on the device (--device cuda only)
A forward of N layers costs one "new batch" call and N - 1 "same batch" calls; the table
gives that average for 32 layers too.

    python bench/guard/guard_overhead.py [--device cpu|cuda] [--calls N] [--out DIR]

Needs torch and attn_doctor with its extension (pip install .). Writes guard-<device>.json
(and prints the table) to --out (default: the current folder; $OUT when set).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import types

import torch

import attn_doctor

H, HK, D = 8, 8, 64
LAYERS = 32


def stand_ins(transformers_version: str) -> None:
    """flash_attn and transformers modules whose entry points return at once."""
    fa = types.ModuleType("flash_attn")
    fa.__version__ = "2.6.3"

    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                               softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                               alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None):
        return q

    fa.flash_attn_varlen_func = flash_attn_varlen_func
    sys.modules["flash_attn"] = fa
    tf = types.ModuleType("transformers")
    tf.__version__ = transformers_version
    mfa = types.ModuleType("transformers.modeling_flash_attention_utils")

    def _flash_attention_forward(query_states, key_states, value_states, attention_mask, query_length,
                                 is_causal, dropout=0.0, position_ids=None, softmax_scale=None,
                                 sliding_window=None, use_top_left_mask=False, softcap=None,
                                 deterministic=None, cu_seq_lens_q=None, cu_seq_lens_k=None,
                                 max_length_q=None, max_length_k=None, target_dtype=None, **kwargs):
        return query_states

    mfa._flash_attention_forward = _flash_attention_forward
    tf.modeling_flash_attention_utils = mfa
    sys.modules["transformers"] = tf
    sys.modules["transformers.modeling_flash_attention_utils"] = mfa


def lengths_for(batch: int, tokens: int) -> list:
    base = tokens // batch
    out = [base] * batch
    out[-1] += tokens - base * batch
    return out


def timings(call, make_args, n: int, sync) -> dict:
    """Per call: wall time, and this thread's CPU time (what the guard computes, whatever else
    the machine runs: a preempted call's wall time grows, its CPU time does not)."""
    wall, cpu = [], []
    for _ in range(n):
        args = make_args()
        sync()
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        call(*args)
        t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        wall.append(t1 - t0)
        cpu.append(c1 - c0)
    return {"wall": wall, "cpu": cpu}


def median(t: dict) -> dict:
    return {k: statistics.median(v) for k, v in t.items()}


def stats(t: dict, base: dict) -> dict:
    out = {}
    for kind in ("cpu", "wall"):
        us = sorted((x - base[kind]) / 1e3 for x in t[kind])
        out[f"{kind}_median_us"] = round(statistics.median(us), 1)
        out[f"{kind}_p99_us"] = round(us[int(0.99 * (len(us) - 1))], 1)
    # the headline numbers: CPU time (the guard's own cost)
    out["median_us"], out["p99_us"] = out["cpu_median_us"], out["cpu_p99_us"]
    return out


def bench_kernel(batch: int, tokens: int, device: str, n: int, sync) -> dict:
    import flash_attn
    q = torch.empty(tokens, H, D, dtype=torch.bfloat16, device=device)
    lens = lengths_for(batch, tokens)
    cu_host = [0]
    for x in lens:
        cu_host.append(cu_host[-1] + x)
    cu = torch.tensor(cu_host, dtype=torch.int32, device=device)
    m = max(lens)
    f = lambda c: flash_attn.flash_attn_varlen_func(q, q, q, c, c, m, m, causal=True)  # noqa: E731
    base = median(timings(f, lambda: (cu,), n, sync))
    out = {}
    with attn_doctor.guard():
        out["new batch"] = stats(timings(f, lambda: (cu.clone(),), n, sync), base)
        out["same batch"] = stats(timings(f, lambda: (cu,), n, sync), base)
    if device != "cpu":
        with attn_doctor.guard(sync=False):
            out["no sync"] = stats(timings(f, lambda: (cu.clone(),), n, sync), base)
    return out


def bench_transformers(batch: int, tokens: int, device: str, n: int, sync) -> dict:
    import transformers.modeling_flash_attention_utils as mfa
    width = tokens // batch
    q = torch.empty(batch, width, H, D, dtype=torch.bfloat16, device=device)
    lens = torch.full((batch,), max(1, (width * 9) // 10), device=device)
    mask = (torch.arange(width, device=device)[None, :] < lens[:, None]).to(torch.int64)
    f = lambda m: mfa._flash_attention_forward(q, q, q, m, width, True)  # noqa: E731
    base = median(timings(f, lambda: (mask,), n, sync))
    out = {}
    with attn_doctor.guard():
        out["new batch"] = stats(timings(f, lambda: (mask.clone(),), n, sync), base)
        out["same batch"] = stats(timings(f, lambda: (mask,), n, sync), base)
    if device != "cpu":
        with attn_doctor.guard(sync=False):
            out["no sync"] = stats(timings(f, lambda: (mask.clone(),), n, sync), base)
    return out


def machine(device: str) -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "attn_doctor": attn_doctor.__version__, "platform": platform.platform(),
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        info["cpu"] = next(line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                           if line.startswith("Model name"))
    except Exception:
        pass
    if device != "cpu":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def markdown(result: dict) -> str:
    """The tables of a result file: per entry point, one row per (tokens, B)."""
    m = result["machine"]
    lines = [f"# Guard overhead per call ({result['device']})", "",
             f"{m.get('cpu')}, {m.get('cores')} cores; Python {m['python']}, torch {m['torch']} "
             f"({result.get('torch_threads', '?')} CPU thread), attn_doctor {m['attn_doctor']}"
             + (f", {m['gpu']}" if "gpu" in m else "") + f"; {result['date']}; load average before/after "
             f"{result.get('load_average_before_after')} (the machine is shared).", "",
             f"Command: `{result['command']}` ({result['calls_per_measurement']} calls per measurement).", "",
             "Microseconds a hooked call costs more with the guard installed: this thread's CPU time "
             "(median / p99; the wall-clock medians are in the JSON). *new batch*: index tensors never seen "
             "(the first layer of a forward: described, checked by the extension); *same batch*: the same "
             f"unmodified index tensors (every later layer: the cached verdict); *{LAYERS} layers*: the average "
             f"per call over a {LAYERS}-layer forward (one new, {LAYERS - 1} same).", ""]
    for entry, what in (("kernel", "`flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, ...)`, q (tokens, "
                         f"{result['heads']}, {result['head_dim']})"),
                        ("transformers", "transformers' `_flash_attention_forward(q, k, v, attention_mask, ...)`, "
                         "a right-padded (B, tokens / B) mask, replayed with the rules of transformers "
                         f"{result['transformers_rules']}")):
        rows = [r for r in result["rows"] if r["entry"] == entry]
        if not rows:
            continue
        extra = [k for k in rows[0] if k == "no sync"]
        head = "| tokens | B | new batch | same batch | " + " | ".join(extra) + (" | " if extra else "") + \
            f"{LAYERS} layers |"
        lines += [f"## {entry}: {what}", "", head, "|" + "---|" * (head.count("|") - 1)]
        for r in rows:
            cells = [f"{r['new batch']['median_us']} / {r['new batch']['p99_us']}",
                     f"{r['same batch']['median_us']} / {r['same batch']['p99_us']}"]
            cells += [f"{r[k]['median_us']} / {r[k]['p99_us']}" for k in extra]
            per = next(v for k, v in r.items() if k.startswith("per call"))
            lines.append(f"| {r['tokens']} | {r['B']} | " + " | ".join(cells) + f" | {per} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--calls", type=int, default=2000, help="calls per measurement")
    parser.add_argument("--batches", default="1,2,4,8,16,32,64")
    parser.add_argument("--tokens", default="4096,16384,65536,131072")
    parser.add_argument("--transformers", default="4.57.1", help="release the stand-in reports")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: on a small shared machine, torch's "
                             "OpenMP regions over large tensors stall when other processes hold the cores)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--markdown", metavar="RESULT_JSON", help="print the tables of a result file and exit")
    args = parser.parse_args()
    if args.markdown:
        with open(args.markdown) as fh:
            print(markdown(json.load(fh)))
        return 0
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    stand_ins(args.transformers)
    sync = torch.cuda.synchronize if args.device != "cpu" else (lambda: None)
    rows = []
    for entry, fn in (("kernel", bench_kernel), ("transformers", bench_transformers)):
        for tokens in [int(x) for x in args.tokens.split(",")]:
            for batch in [int(x) for x in args.batches.split(",")]:
                r = fn(batch, tokens, args.device, args.calls, sync)
                per_forward = (r["new batch"]["median_us"] + (LAYERS - 1) * r["same batch"]["median_us"]) / LAYERS
                rows.append({"entry": entry, "B": batch, "tokens": tokens, **r,
                             f"per call, {LAYERS}-layer forward (median)": round(per_forward, 1)})
                cells = "  ".join(f"{k} {v['median_us']:7.1f} / {v['p99_us']:7.1f}" for k, v in r.items())
                print(f"{entry:12s} B={batch:3d} tokens={tokens:7d}  {cells}  per call over {LAYERS} layers "
                      f"{per_forward:6.1f}", flush=True)
    result = {"what": "guard overhead per hooked call, microseconds (guarded minus unguarded), median / p99; "
                      "median_us/p99_us: this thread's CPU time, wall_*: wall-clock time",
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
              "device": args.device, "calls_per_measurement": args.calls, "heads": H, "head_dim": D,
              "transformers_rules": args.transformers, "machine": machine(args.device),
              "date": time.strftime("%Y-%m-%d"), "torch_threads": args.threads,
              "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)], "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"guard-{args.device.split(':')[0]}.json")
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1)
    with open(path[:-len(".json")] + ".md", "w") as fh:
        fh.write(markdown(result))
    print(f"wrote {path} and its tables ({os.path.basename(path)[:-5]}.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
