#!/usr/bin/env python3
"""The d128 forward under a profiler: our checked and unchecked forward (the launcher's choice,
the warp-specialised wgmma kernel on an H100) and cuDNN's attention (torch SDPA with
SDPBackend.CUDNN_ATTENTION) on dense bf16 batches, H = 32, 16 x 2048 and 4 x 8192, causal and
not. Each variant is warmed up and compared with cuDNN's output outside the profiled range; inside
it (cudaProfilerStart/Stop) each runs `--reps` times under an NVTX range naming it, in the order
checked, unchecked, cudnn per configuration.

    ncu --profile-from-start off ... python3 profile_fwd.py --lib libad_bench.so --reps 1
    python3 profile_fwd.py --lib ... --time 30 --heads 16 32   # CUDA events, no profiler

--time N: no profiler; each configuration's variants timed N rounds, interleaved round-robin
(bench_kernels.time_round_robin, medians), among them the checked form without the record's
reset (a healthy batch records nothing, so the record stays empty) and the reset alone.
"""
import argparse
import json
import math
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../gpu"))
import statistics  # noqa: E402

from bench_kernels import Record, check_rc, load_lib, time_round_robin  # noqa: E402


def timeline(fn, n):
    """The GPU activities (kernels, copies) of n calls of fn under torch.profiler (CUPTI): per call
    position, the median duration of each activity and of the gap before it, in us."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    path = f"/tmp/fwd_trace_{os.getpid()}.json"
    prof.export_chrome_trace(path)
    ev = sorted((e for e in json.load(open(path))["traceEvents"]
                 if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
    per = len(ev) // n
    if per * n != len(ev) or per == 0:
        return f"{len(ev)} activities for {n} calls"
    parts = []
    for j in range(per):
        durs = [ev[i * per + j]["dur"] for i in range(n)]
        gaps = [ev[i * per + j]["ts"] - (ev[i * per + j - 1]["ts"] + ev[i * per + j - 1]["dur"]) for i in range(n) if j > 0]
        name = ev[j]["name"].split("<")[0].split("(")[0].replace("void ", "").replace("ad::kern::attn::", "")[:40]
        parts.append((f"gap {statistics.median(gaps):.1f}, " if gaps else "") + f"{name} {statistics.median(durs):.1f}")
    span = [ev[i * per + per - 1]["ts"] + ev[i * per + per - 1]["dur"] - ev[i * per]["ts"] for i in range(n)]
    return " | ".join(parts) + f" | first start to last end {statistics.median(span):.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--heads", type=int, nargs="+", default=[32])
    ap.add_argument("--time", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    args = ap.parse_args()
    torch.manual_seed(0)
    lib = load_lib(args.lib)
    record = Record(lib)
    stream_ptr = torch.cuda.current_stream().cuda_stream
    d = 128
    cases = []
    for H, causal, L in ((H, c, L) for H in args.heads for c in (False, True) for L in args.lengths):
        B = args.tokens // L
        total = B * L
        q, k, v = (torch.randn(B, L, H, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
        qp, kp, vp = (t.view(total, H, d) for t in (q, k, v))
        qd, kd, vd = (t.transpose(1, 2) for t in (q, k, v))
        cu = torch.arange(0, total + 1, L, dtype=torch.int32, device="cuda")
        out = torch.empty_like(qp)
        lse = torch.empty(H, total, dtype=torch.float32, device="cuda")
        scale = 1.0 / math.sqrt(d)

        def ours(checked, qp=qp, kp=kp, vp=vp, cu=cu, out=out, lse=lse, B=B, L=L, total=total, causal=causal, H=H,
                 reset=True):
            if checked and reset:
                record.reset()
            check_rc(lib, lib.ad_varlen_fwd(
                0, qp.data_ptr(), total, out.data_ptr(), lse.data_ptr(), kp.data_ptr(), vp.data_ptr(), total,
                cu.data_ptr(), cu.data_ptr(), B, H, H, d, L, L, scale, int(causal), -1, -1, 0.0,
                int(checked), 0, record.dev.data_ptr() if checked else None, stream_ptr))

        def cudnn(qd=qd, kd=kd, vd=vd, causal=causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=causal, scale=scale)

        ref = cudnn().transpose(1, 2).reshape(total, H, d).float()
        for checked in (True, False):
            out.fill_(float("nan"))
            ours(checked)
            torch.cuda.synchronize()
            err = ((out.float() - ref).norm() / ref.norm()).item()
            ok = err < 2e-2 and (not checked or record.fields()["count"] == 0)
            print(f"B={B} L={L} causal={int(causal)} checked={int(checked)}: rel err vs cuDNN {err:.2e}"
                  f"{'' if ok else '  VERIFICATION FAILED'}", flush=True)
            if not ok:
                return 1
        name = f"{B}x{L}{' causal' if causal else ''}"
        variants = [("checked", lambda o=ours: o(True)), ("unchecked", lambda o=ours: o(False)),
                    ("cudnn", cudnn)]
        if args.time:
            timed = dict(variants)
            timed["checked_no_reset"] = lambda o=ours: o(True, reset=False)
            timed["reset"] = record.reset
            med = {n: statistics.median(t) for n, t in time_round_robin(timed, args.time, 5).items()}
            flop = 4.0 * H * d * B * (L * (L + 1) // 2 if causal else L * L)
            print(f"H={H} {name}: " + " ".join(f"{n} {1e3 * m:.1f} us" for n, m in med.items()) +
                  f" | TFLOP/s checked {flop / med['checked'] / 1e9:.1f} unchecked {flop / med['unchecked'] / 1e9:.1f}"
                  f" cudnn {flop / med['cudnn'] / 1e9:.1f} | checked / cuDNN {med['cudnn'] / med['checked']:.3f}"
                  f" unchecked / cuDNN {med['cudnn'] / med['unchecked']:.3f} | overhead"
                  f" {100 * (med['checked'] / med['unchecked'] - 1):+.2f} % (without the reset"
                  f" {100 * (med['checked_no_reset'] / med['unchecked'] - 1):+.2f} %)", flush=True)
            for vname in ("checked", "unchecked"):
                try:
                    print(f"    timeline {vname} (us): {timeline(timed[vname], 10)}", flush=True)
                except Exception as e:  # the timings above stand without it
                    print(f"    timeline {vname}: torch.profiler failed: {e}", flush=True)
            continue
        for _ in range(3):
            for _, fn in variants:
                fn()
        cases.append((name, variants))
    if args.time:
        return 0
    kname = lib.ad_varlen_fwd_kernel_name(0, 128, 0, 1) if hasattr(lib, "ad_varlen_fwd_kernel_name") else b"?"
    print("launcher's checked kernel:", kname, flush=True)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for name, variants in cases:
        for vname, fn in variants:
            for _ in range(args.reps):
                torch.cuda.nvtx.range_push(f"{name} {vname}")
                fn()
                torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("profiled order: " + "; ".join(f"{n}: checked, unchecked, cudnn" for n, _ in cases), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
