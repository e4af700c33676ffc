"""Where one layer's attention time goes in the training-step benchmark (bench/gpu/train_step_gpu.py):
the attention function alone, at the step's shapes, timed as forward and backward apart, then
one profiled round per variant with every kernel it launched.

Per head dim and size: the packed batch of equal documents through attn_doctor (rows on and
off) and torch's varlen_attn, and its dense twin through SDPA (torch's choice, and held to
cuDNN). Forward and backward are timed with CUDA events around each (the GPU drained first,
so host time shows where it is not hidden), medians of --repeats; then torch.profiler over
--profiled rounds: each kernel's device time per round, and the host time of the round.

    python bench/gpu/attn_layer_profile.py --out DIR [--shapes 64:16384,128:16384]
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_step_gpu as ts  # noqa: E402  (the step benchmark's model shapes and batches)
from attn_doctor import ops  # noqa: E402


def runner(config, batch, variant, rows, device):
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    q, k, v, dout = ts.layer_tensors(config, batch, variant.split("/")[0], rows, device)
    H, Hk, D = config.num_attention_heads, config.num_key_value_heads, config.head_dim

    class Module:
        is_causal = True
        training = True
        num_key_value_groups = H // Hk
    fn = ALL_ATTENTION_FUNCTIONS[ts.impl_of(variant.split("/")[0])]
    kwargs = {} if variant.startswith("sdpa") else {
        k2: batch[k2] for k2 in ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k") if k2 in batch}

    def fwd():
        with ts._Sdpa(variant == "sdpa_cudnn"):
            out, _ = fn(Module, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None, dropout=0.0,
                        scaling=1.0 / math.sqrt(D), **kwargs)
        return out

    def bwd(out):
        with ts._Sdpa(variant == "sdpa_cudnn"):
            out.backward(dout)
        q.grad = k.grad = v.grad = None
    return fwd, bwd


def timed(fwd, bwd, repeats):
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    f_ms, b_ms, host_f, host_b = [], [], [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        a, m, z = ev(), ev(), ev()
        t0 = time.perf_counter()
        a.record()
        out = fwd()
        m.record()
        t1 = time.perf_counter()
        bwd(out)
        z.record()
        t2 = time.perf_counter()
        z.synchronize()
        f_ms.append(a.elapsed_time(m))
        b_ms.append(m.elapsed_time(z))
        host_f.append((t1 - t0) * 1e3)
        host_b.append((t2 - t1) * 1e3)
    med = statistics.median
    return {"fwd_ms": med(f_ms), "bwd_ms": med(b_ms), "host_fwd_ms": med(host_f), "host_bwd_ms": med(host_b)}


def profiled(fwd, bwd, rounds):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(rounds):
            bwd(fwd())
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            d = kernels.setdefault(e.name, {"us": 0.0, "count": 0})
            d["us"] += e.device_time / rounds if hasattr(e, "device_time") else e.cuda_time / rounds
            d["count"] += 1
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
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    device = torch.device("cuda")
    ts.register_varlen()
    results = {"env": {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "argv": sys.argv[1:]},
               "runs": []}
    for shape in a.shapes.split(","):
        head_dim, size = (int(x) for x in shape.split(":"))
        config = ts.config_for(head_dim, False)
        gen = torch.Generator().manual_seed(size)
        L = a.equal_length
        batch = ts.packed_batch([L] * (size // L), config.vocab_size, device, gen)
        rows = size // L
        for variant in a.variants.split(","):
            ops.set_policy(raise_at="step", rows=not variant.endswith("/norows"))
            fwd, bwd = runner(config, batch, variant, rows, device)
            for _ in range(3):
                bwd(fwd())
            t = timed(fwd, bwd, a.repeats)
            kern = profiled(fwd, bwd, a.profiled)
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
