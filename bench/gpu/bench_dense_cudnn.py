#!/usr/bin/env python3
"""Our varlen forward against the best unchecked attention kernel on the GPU, on dense
equal-length batches: cuDNN's attention (torch SDPA with SDPBackend.CUDNN_ATTENTION, layout
B x H x L x D) and FA2 (PyTorch's bundled varlen kernel) on the same inputs, same run.

The batch is B sequences of L tokens each (bf16, H = 16 heads of 64 / 128 by default);
ours and FA2 see it packed (cu_seqlens = 0, L, 2L, ...), cuDNN sees the dense tensor. TFLOP/s
over the visible (query, key) pairs, 4 * H * D FLOP each (causal: L (L + 1) / 2 per
sequence). Method as bench_kernels.py: outputs verified against FA2 first, variants
interleaved round-robin, medians of CUDA-event timings.

    python bench/gpu/bench_dense_cudnn.py --lib build-gpu/libad_bench.so --json X --md Y
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import Record, check_rc, load_lib, time_round_robin  # noqa: E402


def bench(lib, args, record):
    rows = []
    stream_ptr = torch.cuda.current_stream().cuda_stream
    for d in args.head_dims:
        for causal in (False, True):
            for L in args.lengths:
                B = max(1, args.tokens // L)
                H, total = args.heads, B * L
                q, k, v = (torch.randn(B, L, H, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
                qp, kp, vp = (t.view(total, H, d) for t in (q, k, v))
                qd, kd, vd = (t.transpose(1, 2) for t in (q, k, v))  # B x H x L x D views, as SDPA takes them
                cu = torch.arange(0, total + 1, L, dtype=torch.int32, device="cuda")
                out = torch.empty_like(qp)
                lse = torch.empty(H, total, dtype=torch.float32, device="cuda")
                scale = 1.0 / math.sqrt(d)

                def ours(checked, which=0):
                    if checked:
                        record.reset()
                    check_rc(lib, lib.ad_varlen_fwd(
                        0, qp.data_ptr(), total, out.data_ptr(), lse.data_ptr(), kp.data_ptr(), vp.data_ptr(), total,
                        cu.data_ptr(), cu.data_ptr(), B, H, H, d, L, L, scale, int(causal), -1, -1, 0.0,
                        int(checked), which, record.dev.data_ptr() if checked else None, stream_ptr))

                def fa2():
                    return torch.ops.aten._flash_attention_forward(qp, kp, vp, cu, cu, L, L, 0.0, causal, False,
                                                                   scale=scale)

                def cudnn():
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        return torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=causal,
                                                                                scale=scale)

                ref = fa2()[0].float()
                ours(True)
                torch.cuda.synchronize()
                err_ours = ((out.float() - ref).norm() / ref.norm()).item()
                try:
                    got = cudnn().transpose(1, 2).reshape(total, H, d).float()
                    err_cudnn = ((got - ref).norm() / ref.norm()).item()
                    variants = {"checked": lambda: ours(True), "unchecked": lambda: ours(False), "fa2": fa2,
                                "cudnn": cudnn}
                except RuntimeError as e:  # no cuDNN attention for this shape on this GPU: say so
                    print(f"cuDNN attention unavailable for d={d} causal={causal} L={L}: {e}", flush=True)
                    err_cudnn = None
                    variants = {"checked": lambda: ours(True), "unchecked": lambda: ours(False), "fa2": fa2}
                verified = err_ours < 2e-2 and record.fields()["count"] == 0 and (err_cudnn is None or err_cudnn < 2e-2)
                if args.wgmma_alt:  # the wgmma kernel's other variant (a build with ATTN_DOCTOR_WGMMA_ALT), verified alike
                    out.fill_(float("nan"))
                    ours(True, 5)
                    torch.cuda.synchronize()
                    err_alt = ((out.float() - ref).norm() / ref.norm()).item()
                    verified = verified and err_alt < 2e-2 and record.fields()["count"] == 0
                    variants["alt_checked"] = lambda: ours(True, 5)
                    variants["alt_unchecked"] = lambda: ours(False, 5)
                def extra_variant(name, which, checked):
                    """Kernel `which` run once and compared with FA2's output (and, checked, with an
                    empty record), then timed beside the others; False when it does not verify."""
                    out.fill_(float("nan"))
                    ours(checked, which)
                    torch.cuda.synchronize()
                    e = ((out.float() - ref).norm() / ref.norm()).item()
                    variants[name] = (lambda w, c: lambda: ours(c, w))(which, checked)
                    if not e < 2e-2 or (checked and record.fields()["count"] != 0):
                        print(f"VERIFICATION FAILED ({name}): rel_err={e}", flush=True)
                        return False
                    return True

                extra = []
                if args.wgmma_ws and d == 128:  # the wgmma kernel the warp-specialised default replaced (4),
                    # and the warp-specialised kernel without ping-pong (9)
                    extra += [("wgmma_checked", 4, True), ("wgmma_unchecked", 4, False), ("ws_alt_checked", 9, True)]
                if args.ws_d64 and d == 64:  # the warp-specialised kernel at head dim 64 (8; a build with
                    # ATTN_DOCTOR_WGMMA_WS_D64) beside the default (the wgmma kernel)
                    extra += [("ws_checked", 8, True), ("ws_unchecked", 8, False)]
                for name, which, checked in extra:
                    verified = extra_variant(name, which, checked) and verified
                if args.one_launch:  # the checked form in one launch (a build with ATTN_DOCTOR_FWD_ONE_LAUNCH)
                    out.fill_(float("nan"))
                    ours(True, 6)
                    torch.cuda.synchronize()
                    err_one = ((out.float() - ref).norm() / ref.norm()).item()
                    verified = verified and err_one < 2e-2 and record.fields()["count"] == 0
                    variants["one_checked"] = lambda: ours(True, 6)
                times = time_round_robin(variants, args.reps, args.warmup)
                pairs = B * (L * (L + 1) // 2 if causal else L * L)
                flop = 4.0 * H * d * pairs
                med = {n: statistics.median(t) for n, t in times.items()}
                row = {"head_dim": d, "causal": causal, "batch": B, "length": L, "heads": H, "ms": med,
                       "tflops": {n: flop / (m * 1e-3) / 1e12 for n, m in med.items()},
                       "rel_err_vs_fa2": err_ours, "cudnn_rel_err_vs_fa2": err_cudnn, "verified": verified}
                rows.append(row)
                t = row["tflops"]
                print(f"dense d={d} causal={int(causal)} B={B} L={L}: ours {t['checked']:.1f} "
                      f"(unchecked {t['unchecked']:.1f}) FA2 {t['fa2']:.1f} cuDNN {t.get('cudnn', float('nan')):.1f} "
                      f"TFLOP/s{'' if verified else '  UNVERIFIED'}", flush=True)
                if "wgmma_checked" in t:
                    c = t.get("cudnn", float("nan"))
                    print(f"     wgmma kernel (before): checked {t['wgmma_checked']:.1f} ({t['wgmma_checked'] / c:.2f}x "
                          f"cuDNN) unchecked {t['wgmma_unchecked']:.1f} ({t['wgmma_unchecked'] / c:.2f}x); default: checked "
                          f"{t['checked'] / c:.2f}x unchecked {t['unchecked'] / c:.2f}x cuDNN; without ping-pong "
                          f"(checked) {t['ws_alt_checked']:.1f}", flush=True)
                if "ws_checked" in t and d == 64:
                    c = t.get("cudnn", float("nan"))
                    print(f"     warp-specialised d64: checked {t['ws_checked']:.1f} ({t['ws_checked'] / c:.2f}x cuDNN, "
                          f"{med['checked'] / med['ws_checked']:.3f}x the default) unchecked {t['ws_unchecked']:.1f} "
                          f"({t['ws_unchecked'] / c:.2f}x cuDNN)", flush=True)
                if "one_checked" in t:
                    print(f"     one launch: checked {t['one_checked']:.1f} TFLOP/s; overhead two launches "
                          f"{100 * (med['checked'] / med['unchecked'] - 1):+.1f}%, one launch "
                          f"{100 * (med['one_checked'] / med['unchecked'] - 1):+.1f}%", flush=True)
                if "alt_checked" in t:
                    print(f"     wgmma alt variant: checked {t['alt_checked']:.1f} unchecked {t['alt_unchecked']:.1f} "
                          f"TFLOP/s", flush=True)
                del q, k, v, out, lse
    return rows


def write_md(rows, path, meta):
    lines = [f"### Dense equal-length batches, bf16 forward ({meta['device']}, torch {meta['torch']})", "",
             "| head_dim | causal | B x L | ours checked TFLOP/s | ours unchecked | FA2 | cuDNN | ours/cuDNN | "
             "ours/FA2 |", "|---:|:---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t = r["tflops"]
        cudnn = t.get("cudnn")
        cudnn_cell = "n/a" if cudnn is None else "%.1f" % cudnn
        ratio_cell = "n/a" if cudnn is None else "%.0f%%" % (100 * t["checked"] / cudnn)
        lines.append(f"| {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {r['batch']} x {r['length']} | "
                     f"{t['checked']:.1f} | {t['unchecked']:.1f} | {t['fa2']:.1f} | {cudnn_cell} | {ratio_cell} | "
                     f"{100 * t['checked'] / t['fa2']:.0f}% |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libad_bench.so")
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--wgmma-alt", action="store_true",
                    help="also time the wgmma kernel's other variant (a build with ATTN_DOCTOR_WGMMA_ALT)")
    ap.add_argument("--wgmma-ws", action="store_true",
                    help="at head dim 128 also time the wgmma kernel the warp-specialised default replaced and the "
                         "warp-specialised kernel without ping-pong")
    ap.add_argument("--ws-d64", action="store_true",
                    help="at head dim 64 also time the warp-specialised kernel (a build with ATTN_DOCTOR_WGMMA_WS_D64)")
    ap.add_argument("--one-launch", action="store_true",
                    help="also time the wgmma kernel's checked form in one launch (a build with ATTN_DOCTOR_FWD_ONE_LAUNCH)")
    ap.add_argument("--json")
    ap.add_argument("--md")
    args = ap.parse_args()
    torch.manual_seed(0)
    lib = load_lib(args.lib)
    record = Record(lib)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "argv": sys.argv, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    rows = bench(lib, args, record)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "dense": rows}, f, indent=1)
    if args.md:
        write_md(rows, args.md, meta)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
