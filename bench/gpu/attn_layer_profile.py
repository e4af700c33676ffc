"""Where one layer's attention time goes in the training-step benchmark (bench/gpu/train_step_gpu.py):
the attention function alone, at the step's shapes, timed as forward and backward apart, then
one profiled round per variant with every kernel it launched.

Per head dim and size: the packed batch of equal documents through attn_doctor (rows on and
off) and torch's varlen_attn, and its dense twin through SDPA (torch's choice, and held to
cuDNN). Forward and backward are timed with CUDA events around each (the GPU drained first,
so host time shows where it is not hidden), medians of --repeats; then torch.profiler over
--profiled rounds: each kernel's device time per round, and the host time of the round.

    python bench/gpu/attn_layer_profile.py --out DIR [--shapes 64:16384,128:16384]
    python bench/gpu/attn_layer_profile.py --device cpu --tiny --out DIR   # a smoke test, CPU twin

On the CPU (--device cpu: attn_doctor and SDPA only) the times are the host's and the table
lists the operators by their own CPU time per round, in the same fields.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_step_gpu as ts  # noqa: E402  (the step benchmark's model shapes and batches)
from attn_doctor import ops  # noqa: E402


def timed(fwd, bwd, repeats, device):
    cuda = device.type == "cuda"
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    f_ms, b_ms, host_f, host_b = [], [], [], []
    for _ in range(repeats):
        ts.sync(device)
        if cuda:
            a, m, z = ev(), ev(), ev()
        t0 = time.perf_counter()
        if cuda:
            a.record()
        out = fwd()
        if cuda:
            m.record()
        t1 = time.perf_counter()
        bwd(out)
        if cuda:
            z.record()
        t2 = time.perf_counter()
        if cuda:
            z.synchronize()
        host_f.append((t1 - t0) * 1e3)
        host_b.append((t2 - t1) * 1e3)
        f_ms.append(a.elapsed_time(m) if cuda else host_f[-1])
        b_ms.append(m.elapsed_time(z) if cuda else host_b[-1])
    med = statistics.median
    return {"fwd_ms": med(f_ms), "bwd_ms": med(b_ms), "host_fwd_ms": med(host_f), "host_bwd_ms": med(host_b)}


def profiled(fwd, bwd, rounds, device):
    from torch.profiler import ProfilerActivity, profile
    cuda = device.type == "cuda"
    ts.sync(device)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(rounds):
            bwd(fwd())
        ts.sync(device)
    kernels = {}
    if cuda:
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                d = kernels.setdefault(e.name, {"us": 0.0, "count": 0})
                d["us"] += e.device_time / rounds if hasattr(e, "device_time") else e.cuda_time / rounds
                d["count"] += 1
    else:
        for e in prof.key_averages():
            kernels[e.key] = {"us": e.self_cpu_time_total / rounds, "count": e.count}
    rows = sorted(({"kernel": n[:140], "us_per_round": round(d["us"], 1), "launches_per_round": d["count"] / rounds}
                   for n, d in kernels.items()), key=lambda r: -r["us_per_round"])
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="bench/results/local")
    p.add_argument("--shapes", default="64:16384,128:16384")
    p.add_argument("--variants", default="attn_doctor,attn_doctor/norows,torch_varlen,sdpa,sdpa_cudnn")
    p.add_argument("--equal-length", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--profiled", type=int, default=3)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="the step benchmark's tiny model and sizes (its --tiny)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if cuda:
        ts.register_varlen()
    variants = [v for v in a.variants.split(",") if v and (cuda or v.split("/")[0] in ("attn_doctor", "sdpa"))]
    results = {"env": {"torch": torch.__version__, "device": torch.cuda.get_device_name() if cuda else "cpu",
                       "argv": sys.argv[1:]}, "runs": []}
    for shape in a.shapes.split(","):
        head_dim, size = (int(x) for x in shape.split(":"))
        config = ts.config_for(head_dim, a.tiny)
        gen = torch.Generator().manual_seed(size)
        size, L = (size // 64, 32) if a.tiny else (size, a.equal_length)  # as train_step_gpu.py --tiny
        batch = ts.packed_batch([L] * (size // L), config.vocab_size, device, gen)
        rows = size // L
        for variant in variants:
            ops.set_policy(raise_at="step", rows=not variant.endswith("/norows"))
            fwd, bwd = ts.layer_call(config, batch, variant.split("/")[0], rows, device)
            for _ in range(3):
                bwd(fwd())
            t = timed(fwd, bwd, a.repeats, device)
            kern = profiled(fwd, bwd, a.profiled, device)
            if variant.startswith("attn_doctor"):
                ops.check()
            run = {"head_dim": head_dim, "tokens": size, "heads": config.num_attention_heads,
                   "kv_heads": config.num_key_value_heads, "variant": variant, **t, "kernels": kern}
            results["runs"].append(run)
            print(f"d{head_dim} {size} {variant:20s} fwd {t['fwd_ms']:.3f} ms bwd {t['bwd_ms']:.3f} ms  "
                  f"host fwd {t['host_fwd_ms']:.3f} bwd {t['host_bwd_ms']:.3f}", flush=True)
            for r in kern[:12]:
                print(f"    {r['us_per_round']:9.1f} us x{r['launches_per_round']:.0f}  {r['kernel'][:110]}")
            with open(os.path.join(a.out, "attn-layer-profile.json"), "w") as f:
                json.dump(results, f, indent=1)
    ops.set_policy()


if __name__ == "__main__":
    main()
