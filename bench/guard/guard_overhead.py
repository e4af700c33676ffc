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


def timings(call, make_args, n: int, sync) -> list:
    out = []
    for _ in range(n):
        args = make_args()
        sync()
        t0 = time.perf_counter_ns()
        call(*args)
        out.append(time.perf_counter_ns() - t0)
    return out


def stats(ns: list, base_ns: float) -> dict:
    us = sorted((x - base_ns) / 1e3 for x in ns)
    return {"median_us": round(statistics.median(us), 1), "p99_us": round(us[int(0.99 * (len(us) - 1))], 1)}


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
    base = statistics.median(timings(f, lambda: (cu,), n, sync))
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
    base = statistics.median(timings(f, lambda: (mask,), n, sync))
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--calls", type=int, default=2000, help="calls per measurement")
    parser.add_argument("--batches", default="1,2,4,8,16,32,64")
    parser.add_argument("--tokens", default="4096,16384,65536,131072")
    parser.add_argument("--transformers", default="4.57.1", help="release the stand-in reports")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
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
    result = {"what": "guard overhead per hooked call, microseconds (guarded minus unguarded), median / p99",
              "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
              "device": args.device, "calls_per_measurement": args.calls, "heads": H, "head_dim": D,
              "transformers_rules": args.transformers, "machine": machine(args.device),
              "date": time.strftime("%Y-%m-%d"), "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"guard-{args.device.split(':')[0]}.json")
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
