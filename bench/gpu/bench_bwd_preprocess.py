#!/usr/bin/env python3
"""Times the checked backward's small launches alone (the preprocess: softmax_d = rowsum(dO * O)
and zeroing dq_accum; the dq conversion; GQA's group sum) at the 1B-class training step's shapes
(bench/gpu/train_step_gpu.py: TinyLlama's 2048 hidden as 32 heads of 64 or 16 of 128, 4
key/value heads, bf16, one packed row of documents of 128-4096 tokens, causal), through
attn_doctor.ops.varlen_attn's backward under torch.profiler: the device time per call of each
kernel (median over --reps backward calls, each profiled) and the bandwidth it reaches over the
bytes it must move (preprocess: dO and O read, softmax_d written, dq_accum's tile rows zeroed;
conversion: the segments' dq_accum rows read, dq written).

Verified first: dq, dk, dv against torch's varlen_attn (FA2) on the same call when torch has it
(relative Frobenius error, bf16 tolerance 2e-2), and ops.check() raises nothing. --device cpu
(the CI smoke test, python/tests/test_bwd_preprocess_bench.py): the same call on the CPU twin,
its gradients against per-document SDPA in fp32, nothing timed. Writes JSON
(--json) and prints a table. Run it on two trees (before / after a kernel change) on the same
machine to compare; bench/results/bwd-preprocess-2026-11-27/README.md has the command.
"""
import argparse
import inspect
import itertools
import json
import statistics
import sys

import torch


def random_lengths(total, lo, hi, gen):
    """train_step_gpu.py's documents: lengths uniform in [lo, hi] until they fill `total`."""
    lengths = []
    while sum(lengths) < total:
        n = int(torch.randint(lo, hi + 1, (1,), generator=gen))
        lengths.append(min(n, total - sum(lengths)))
    return lengths


STEPS = {"preprocess": "varlen_bwd_preprocess_kernel", "convert_dq": "varlen_bwd_convert_dq_kernel",
         "group_sum": "varlen_bwd_group_sum"}  # the 16-byte and the scalar form


def device_us(evt):
    """A kernel event's duration (µs): its device time, else its own time range."""
    for a in ("self_device_time_total", "self_cuda_time_total"):
        v = getattr(evt, a, None)
        if v:
            return float(v)
    return float(evt.time_range.elapsed_us())


def one_backward(fn):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    times = {k: 0.0 for k in STEPS}
    times["other"] = 0.0
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        step = next((k for k, n in STEPS.items() if n in e.name), "other")
        times[step] += device_us(e)
    return times


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def sdpa_grads(q, k, v, g, lengths):
    """dq, dk, dv of causal attention per document (SDPA in fp32, key/value heads repeated)."""
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    G = q.shape[1] // k.shape[1]
    outs, s = [], 0
    for n in lengths:
        qs = qf[s:s + n].transpose(0, 1)
        ks = kf[s:s + n].repeat_interleave(G, 1).transpose(0, 1)
        vs = vf[s:s + n].repeat_interleave(G, 1).transpose(0, 1)
        outs.append(torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True).transpose(0, 1))
        s += n
    return torch.autograd.grad(torch.cat(outs), (qf, kf, vf), g.float())


def run(args, D, T):
    from attn_doctor import ops
    dev = args.device
    H, Hk = 2048 // D, 4
    gen = torch.Generator().manual_seed(args.seed + T + D)
    lengths = random_lengths(T, args.doc_min, args.doc_max, gen)
    cu = torch.tensor([0] + list(itertools.accumulate(lengths)), dtype=torch.int32, device=dev)
    mx = max(lengths)
    torch.manual_seed(args.seed)
    q = torch.randn(T, H, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(T, Hk, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(T, Hk, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(T, H, D, device=dev, dtype=torch.bfloat16)
    out = ops.varlen_attn(q, k, v, cu, cu, mx, mx, window_size=(-1, 0))
    ours = torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
    ops.check()
    err, against = None, None
    if dev == "cpu":
        err, against = max(rel(a, b) for a, b in zip(ours, sdpa_grads(q, k, v, g, lengths))), "sdpa_fp32"
    else:
        try:
            from torch.nn.attention.varlen import varlen_attn
            # causal as is_causal (2.10) or window_size=(-1, 0) (2.11 on), as train_step_gpu.py asks
            causal = {"is_causal": True} if "is_causal" in inspect.signature(varlen_attn).parameters else \
                {"window_size": (-1, 0)}
            ref_out = varlen_attn(q, k, v, cu, cu, mx, mx, **causal)
            err, against = max(rel(a, b) for a, b in zip(ours, torch.autograd.grad(ref_out, (q, k, v), g))), "varlen_attn"
        except ImportError:
            pass
    if err is not None and err > 2e-2:
        sys.exit(f"d{D} T{T}: gradients differ from {against}'s (relative {err:.3g})")
    row = {"head_dim": D, "tokens": T, "heads": H, "heads_k": Hk, "segments": len(lengths), "max_seqlen": mx,
           "grad_rel_err": err, "grad_reference": against}
    if dev == "cpu":  # the CPU twin launches no kernels: nothing to time
        return row

    def backward():
        torch.autograd.grad(out, (q, k, v), g, retain_graph=True)

    for _ in range(args.warmup):
        backward()
    torch.cuda.synchronize()
    samples = [one_backward(backward) for _ in range(args.reps)]
    ops.check()
    med = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
    # bytes each kernel must move
    tile_rows = sum((n + 127) // 128 * 128 for n in lengths)
    pre_bytes = 2 * T * H * D * 2 + T * H * 4 + tile_rows * H * D * 4
    conv_bytes = T * H * D * 4 + T * H * D * 2
    row.update({"us": med,
                "preprocess_GBps": pre_bytes / med["preprocess"] / 1e3 if med["preprocess"] else None,
                "convert_dq_GBps": conv_bytes / med["convert_dq"] / 1e3 if med["convert_dq"] else None,
                "preprocess_bytes": pre_bytes, "convert_dq_bytes": conv_bytes})
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="+", default=[8192, 16384])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--doc-min", type=int, default=128)
    ap.add_argument("--doc-max", type=int, default=4096)
    ap.add_argument("--label", default="")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = [run(args, D, T) for D in args.head_dims for T in args.tokens]
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu (the CPU twin; nothing timed)"
    print(f"{args.label} {device}")
    print("| head_dim | tokens | preprocess us | GB/s | convert_dq us | GB/s | group_sum us | rest of backward us |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in (r for r in rows if "us" in r):
        u = r["us"]
        print(f"| {r['head_dim']} | {r['tokens']} | {u['preprocess']:.1f} | {r['preprocess_GBps'] or 0:.0f} | "
              f"{u['convert_dq']:.1f} | {r['convert_dq_GBps'] or 0:.0f} | {u['group_sum']:.1f} | {u['other']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "device": device, "torch": torch.__version__,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
