#!/usr/bin/env python3
"""Times attn-doctor's checked varlen backward against PyTorch's FA2 varlen backward
(torch.ops.aten._flash_attention_backward) on the same GPU, same inputs, same run.

bf16, head_dim 64 / 128 (--head-dims: also 96, 192 and 256), causal and not, 16k-64k total tokens in sequences of 512-4096
(bench_kernels.py's segment generator). Each side runs its own forward first (FA2's forward
for FA2's backward, ours for ours: each backward reads the O and LSE its forward wrote), then
the backward is timed alone: ours checked (every launch with its violation record) and
unchecked, and FA2's. TFLOP/s over the exact count of visible (query, key) pairs, 10 * H * D
FLOP each (the five matrix products of the backward: 2.5x the forward's 4 * H * D).

Verified before timing: our dq, dk, dv against FA2's (relative Frobenius error, bf16
tolerance 2e-2), and the checked form's record empty. Method as bench_kernels.py: random
inputs, CUDA events, warm-up, variants interleaved round-robin, median. Writes JSON (--json)
and a Markdown table (--md).

--dense: equal-length batches B x L (--dense-shapes, default 16x2048 and 4x8192; H = --heads
query and key heads) against cuDNN's backward as well, as bench_dense_cudnn.py does for the
forward: ours and FA2 see the batch packed (cu_seqlens 0, L, 2L, ...: one segment per batch
row), cuDNN sees the dense B x H x L x D views through SDPA held to
SDPBackend.CUDNN_ATTENTION (its forward once, then torch.autograd.grad timed: the backward
node of _scaled_dot_product_cudnn_attention). Each side's gradients are compared with FA2's
before timing.
"""
import argparse
import ctypes
import json
import math
import statistics
import sys

import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
from bench_kernels import Record, check_rc, segment_lengths, time_round_robin, visible_pairs  # noqa: E402


def load_lib(path):
    lib = ctypes.CDLL(path)
    P, I, I64, F, I32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_int32
    lib.ad_last_error.restype = ctypes.c_char_p
    lib.ad_record_size.restype = ctypes.c_size_t
    lib.ad_empty_record.argtypes = [P]
    lib.ad_record_fields.argtypes = [P, P]
    lib.ad_varlen_fwd.argtypes = [I, P, I64, P, P, P, P, I64, P, P, I32, I32, I32, I32, I32, I32, F, I, I32, I32,
                                  F, I, I, P, P]
    lib.ad_varlen_bwd_kernel_name.restype = ctypes.c_char_p
    lib.ad_varlen_bwd_kernel_name.argtypes = [I, I32, I32, I]
    lib.ad_varlen_bwd_workspace.argtypes = [I64, I32, I32, I32, I32, I32, P]
    lib.ad_varlen_bwd.argtypes = [I, P, P, P, P, P, P, P, P, P, P, P, P, P, I64, I64, P, P, I32, I32, I32, I32, I32,
                                  I32, F, I, I32, I32, F, I, I32, P, P]
    return lib


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def bench(lib, args, gen, record):
    rows = []
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    H, Hk = args.heads, args.heads_k
    for head_dim in args.head_dims:
        for causal in (False, True):
            for total in args.tokens:
                lens = segment_lengths(total, args.min_len, args.max_len, gen)
                N = len(lens)
                cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device="cuda")
                max_len = max(lens)
                q = torch.randn(total, H, head_dim, dtype=torch.bfloat16, device="cuda")
                k = torch.randn(total, Hk, head_dim, dtype=torch.bfloat16, device="cuda")
                v = torch.randn(total, Hk, head_dim, dtype=torch.bfloat16, device="cuda")
                dout = torch.randn(total, H, head_dim, dtype=torch.bfloat16, device="cuda")
                scale = 1.0 / math.sqrt(head_dim)
                out = torch.empty_like(q)
                lse = torch.empty(H, total, dtype=torch.float32, device="cuda")
                ws = (ctypes.c_int64 * 2)()
                lib.ad_varlen_bwd_workspace(total, H, head_dim, N, max_len, max_len, ctypes.cast(ws, ctypes.c_void_p))
                softmax_d = torch.empty(ws[0], dtype=torch.float32, device="cuda")
                dq_accum = torch.empty(ws[1], dtype=torch.float32, device="cuda")
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                dk_x = torch.empty(total, H, head_dim, dtype=torch.bfloat16, device="cuda") if H != Hk else dk
                dv_x = torch.empty(total, H, head_dim, dtype=torch.bfloat16, device="cuda") if H != Hk else dv

                record.reset()
                check_rc(lib, lib.ad_varlen_fwd(
                    0, q.data_ptr(), total, out.data_ptr(), lse.data_ptr(), k.data_ptr(), v.data_ptr(), total,
                    cu.data_ptr(), cu.data_ptr(), N, H, Hk, head_dim, max_len, max_len, scale, int(causal), -1, -1,
                    0.0, 1, 0, record.dev.data_ptr(), stream))

                def ours(checked, block_m=0):
                    if checked:
                        record.reset()
                    check_rc(lib, lib.ad_varlen_bwd(
                        0, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), dout.data_ptr(), lse.data_ptr(),
                        dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), dk_x.data_ptr(), dv_x.data_ptr(),
                        softmax_d.data_ptr(), dq_accum.data_ptr(), total, total, cu.data_ptr(), cu.data_ptr(), N, H,
                        Hk, head_dim, max_len, max_len, scale, int(causal), -1, -1, 0.0, int(checked), block_m,
                        record.dev.data_ptr() if checked else None, stream))

                kf = k if H == Hk else k.repeat_interleave(H // Hk, dim=1)
                vf = v if H == Hk else v.repeat_interleave(H // Hk, dim=1)
                fwd = torch.ops.aten._flash_attention_forward(q, kf, vf, cu, cu, max_len, max_len, 0.0, causal, False,
                                                              scale=scale)
                f_out, f_lse, f_seed, f_off = fwd[0], fwd[1], fwd[2], fwd[3]

                def fa2():
                    return torch.ops.aten._flash_attention_backward(
                        dout, q, kf, vf, f_out, f_lse, cu, cu, max_len, max_len, 0.0, causal, f_seed, f_off,
                        scale=scale)

                # verify before timing (each shape of the key-block kernel this head dim has)
                g = fa2()
                rdq, rdk, rdv = g[0], g[1], g[2]
                if H != Hk:
                    rdk = rdk.view(total, Hk, H // Hk, head_dim).float().sum(2)
                    rdv = rdv.view(total, Hk, H // Hk, head_dim).float().sum(2)
                # the default kernel (block_m 0: wgmma on an H100 / H200) and the mma.sync kernel's
                # default shape (d128: 32 rows per step, d64: 64); 192 and 256 have one kernel
                alt = {128: 32, 64: 64, 96: 64}.get(head_dim)
                shapes = [0] + ([alt] if alt else [])
                verified = True
                for bm in shapes:
                    for t in (dq, dk, dv):
                        t.fill_(float("nan"))
                    ours(True, bm)
                    torch.cuda.synchronize()
                    rec = record.fields()
                    e = {"dq": rel(dq, rdq), "dk": rel(dk, rdk), "dv": rel(dv, rdv), "out": rel(out, f_out)}
                    if bm == 0:
                        errs = e
                    ok = rec["count"] == 0 and all(x < 2e-2 for x in e.values())
                    verified = verified and ok
                    if not ok:
                        print(f"VERIFICATION FAILED: d={head_dim} causal={causal} total={total} block_m={bm} "
                              f"errs={e} record={rec}", flush=True)
                variants = {"checked": lambda: ours(True), "unchecked": lambda: ours(False), "fa2": fa2}
                if alt:
                    variants["alt_checked"] = lambda: ours(True, alt)
                    variants["alt_unchecked"] = lambda: ours(False, alt)
                times = time_round_robin(variants, args.reps, args.warmup)
                flop = 10.0 * H * head_dim * visible_pairs(lens, causal)
                med = {n: statistics.median(t) for n, t in times.items()}
                row = {
                    "head_dim": head_dim, "causal": causal, "tokens": total, "heads": H, "heads_k": Hk,
                    "segments": N, "min_len": min(lens), "max_len": max_len, "gflop": flop / 1e9,
                    "ms": med, "ms_min_max": {n: (min(t), max(t)) for n, t in times.items()},
                    "tflops": {n: flop / (m * 1e-3) / 1e12 for n, m in med.items()},
                    "rel_err_vs_fa2": errs, "verified": verified, "alt_block_m": alt,
                    "kernel": lib.ad_varlen_bwd_kernel_name(0, head_dim, 0, 1).decode(),
                }
                if alt:
                    row["alt_kernel"] = lib.ad_varlen_bwd_kernel_name(0, head_dim, alt, 1).decode()
                row["ours_over_fa2"] = med["fa2"] / med["checked"]
                row["check_overhead"] = med["checked"] / med["unchecked"] - 1.0
                rows.append(row)
                print(f"bwd d={head_dim:3d} causal={int(causal)} tokens={total:6d} segs={N:3d} "
                      f"ours {row['tflops']['checked']:6.1f} (unchecked {row['tflops']['unchecked']:6.1f}) "
                      f"FA2 {row['tflops']['fa2']:6.1f} TFLOP/s  ratio {row['ours_over_fa2']:.2f} "
                      f"overhead {100 * row['check_overhead']:+.1f}%  err dq {errs['dq']:.1e} dk {errs['dk']:.1e} "
                      f"dv {errs['dv']:.1e}{'' if verified else '  UNVERIFIED'}", flush=True)
                if alt:
                    row["alt_check_overhead"] = med["alt_checked"] / med["alt_unchecked"] - 1.0
                    print(f"     block_m {alt}: checked {row['tflops']['alt_checked']:6.1f} unchecked "
                          f"{row['tflops']['alt_unchecked']:6.1f} TFLOP/s", flush=True)
                del q, k, v, dout, out, lse, softmax_d, dq_accum, dq, dk, dv, dk_x, dv_x, fwd, g
    return rows


def bench_dense(lib, args, record):
    """The dense mode (module docstring): B x L batches, ours / FA2 / cuDNN backward."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    H = args.heads
    for head_dim in args.head_dims:
        for causal in (False, True):
            for shape in args.dense_shapes:
                B, L = (int(x) for x in shape.lower().split("x"))
                total = B * L
                scale = 1.0 / math.sqrt(head_dim)
                q4, k4, v4, do4 = (torch.randn(B, L, H, head_dim, dtype=torch.bfloat16, device="cuda") for _ in range(4))
                q, k, v, dout = (t.view(total, H, head_dim) for t in (q4, k4, v4, do4))
                cu = torch.arange(0, total + 1, L, dtype=torch.int32, device="cuda")
                out = torch.empty_like(q)
                lse = torch.empty(H, total, dtype=torch.float32, device="cuda")
                ws = (ctypes.c_int64 * 2)()
                lib.ad_varlen_bwd_workspace(total, H, head_dim, B, L, L, ctypes.cast(ws, ctypes.c_void_p))
                softmax_d = torch.empty(ws[0], dtype=torch.float32, device="cuda")
                dq_accum = torch.empty(ws[1], dtype=torch.float32, device="cuda")
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                record.reset()
                check_rc(lib, lib.ad_varlen_fwd(
                    0, q.data_ptr(), total, out.data_ptr(), lse.data_ptr(), k.data_ptr(), v.data_ptr(), total,
                    cu.data_ptr(), cu.data_ptr(), B, H, H, head_dim, L, L, scale, int(causal), -1, -1,
                    0.0, 1, 0, record.dev.data_ptr(), stream))

                def ours(checked):
                    if checked:
                        record.reset()
                    check_rc(lib, lib.ad_varlen_bwd(
                        0, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), dout.data_ptr(), lse.data_ptr(),
                        dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                        softmax_d.data_ptr(), dq_accum.data_ptr(), total, total, cu.data_ptr(), cu.data_ptr(), B, H,
                        H, head_dim, L, L, scale, int(causal), -1, -1, 0.0, int(checked), 0,
                        record.dev.data_ptr() if checked else None, stream))

                fwd = torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, L, L, 0.0, causal, False, scale=scale)

                def fa2():
                    return torch.ops.aten._flash_attention_backward(
                        dout, q, k, v, fwd[0], fwd[1], cu, cu, L, L, 0.0, causal, fwd[2], fwd[3], scale=scale)

                # cuDNN: the B x H x L x D views of the same tensors, through SDPA held to cuDNN
                qd, kd, vd = (t.detach().transpose(1, 2).requires_grad_() for t in (q4, k4, v4))
                dod = do4.transpose(1, 2)
                cudnn, cudnn_node, err_cudnn = None, None, None
                try:
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        od = torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=causal,
                                                                              scale=scale)
                    cudnn_node = type(od.grad_fn).__name__

                    def cudnn():
                        return torch.autograd.grad(od, (qd, kd, vd), dod, retain_graph=True)
                except RuntimeError as e:  # no cuDNN attention for this shape on this GPU: say so
                    print(f"cuDNN attention unavailable for d={head_dim} causal={causal} {B}x{L}: {e}", flush=True)

                g = fa2()
                rdq, rdk, rdv = g[0], g[1], g[2]
                for t in (dq, dk, dv):
                    t.fill_(float("nan"))
                ours(True)
                torch.cuda.synchronize()
                rec = record.fields()
                errs = {"dq": rel(dq, rdq), "dk": rel(dk, rdk), "dv": rel(dv, rdv), "out": rel(out, fwd[0])}
                verified = rec["count"] == 0 and all(x < 2e-2 for x in errs.values())
                variants = {"checked": lambda: ours(True), "unchecked": lambda: ours(False), "fa2": fa2}
                if cudnn is not None:
                    c = cudnn()
                    err_cudnn = {n: rel(x.transpose(1, 2).reshape(total, H, head_dim), r)
                                 for n, x, r in zip(("dq", "dk", "dv"), c, (rdq, rdk, rdv))}
                    verified = verified and all(x < 2e-2 for x in err_cudnn.values())
                    variants["cudnn"] = cudnn
                if not verified:
                    print(f"VERIFICATION FAILED: dense d={head_dim} causal={causal} {B}x{L} errs={errs} "
                          f"cudnn={err_cudnn} record={rec}", flush=True)
                times = time_round_robin(variants, args.reps, args.warmup)
                pairs = B * (L * (L + 1) // 2 if causal else L * L)
                flop = 10.0 * H * head_dim * pairs
                med = {n: statistics.median(t) for n, t in times.items()}
                row = {"head_dim": head_dim, "causal": causal, "batch": B, "length": L, "heads": H,
                       "gflop": flop / 1e9, "ms": med, "ms_min_max": {n: (min(t), max(t)) for n, t in times.items()},
                       "tflops": {n: flop / (m * 1e-3) / 1e12 for n, m in med.items()},
                       "rel_err_vs_fa2": errs, "cudnn_rel_err_vs_fa2": err_cudnn, "cudnn_node": cudnn_node,
                       "verified": verified, "kernel": lib.ad_varlen_bwd_kernel_name(0, head_dim, 0, 1).decode(),
                       "ours_over_fa2": med["fa2"] / med["checked"],
                       "check_overhead": med["checked"] / med["unchecked"] - 1.0}
                if "cudnn" in med:
                    row["ours_over_cudnn"] = med["cudnn"] / med["checked"]
                    row["cudnn_over_fa2"] = med["fa2"] / med["cudnn"]
                rows.append(row)
                t = row["tflops"]
                print(f"dense bwd d={head_dim:3d} causal={int(causal)} {B}x{L}: ours {t['checked']:6.1f} (unchecked "
                      f"{t['unchecked']:6.1f}) FA2 {t['fa2']:6.1f} cuDNN {t.get('cudnn', float('nan')):6.1f} TFLOP/s  "
                      f"ours/cuDNN {row.get('ours_over_cudnn', float('nan')):.2f} ours/FA2 {row['ours_over_fa2']:.2f} "
                      f"overhead {100 * row['check_overhead']:+.1f}%{'' if verified else '  UNVERIFIED'}", flush=True)
                del q4, k4, v4, do4, q, k, v, dout, out, lse, softmax_d, dq_accum, dq, dk, dv, fwd, g, qd, kd, vd
    return rows


def markdown_dense(rows, device):
    lines = [f"Dense backward, bf16, {device}: B x L batches of H = {rows[0]['heads'] if rows else '?'} heads; "
             "ours and FA2 (torch.ops.aten._flash_attention_backward) on the packed rows, cuDNN through SDPA "
             "(SDPBackend.CUDNN_ATTENTION); median of the timed runs, TFLOP/s over 10 * H * D FLOP per visible "
             "(query, key) pair.", "",
             "| head_dim | causal | B x L | ours checked TFLOP/s | ours unchecked | FA2 | cuDNN | checked / cuDNN "
             "speed | checked / FA2 | cuDNN / FA2 | check overhead |",
             "|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t = r["tflops"]

        def cell(v, fmt):
            return "n/a" if v is None else fmt % v
        lines.append(f"| {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {r['batch']} x {r['length']} | "
                     f"{t['checked']:.1f} | {t['unchecked']:.1f} | {t['fa2']:.1f} | {cell(t.get('cudnn'), '%.1f')} | "
                     f"{cell(r.get('ours_over_cudnn'), '%.2f')} | {r['ours_over_fa2']:.2f} | "
                     f"{cell(r.get('cudnn_over_fa2'), '%.2f')} | {100 * r['check_overhead']:+.1f} %"
                     f"{'' if r['verified'] else ' UNVERIFIED'} |")
    return "\n".join(lines) + "\n"


def markdown(rows, device):
    kernels = ", ".join(sorted({r["kernel"] for r in rows if "kernel" in r}))
    lines = [f"Varlen backward, bf16, {device}: attn-doctor's checked kernel ({kernels}) vs FA2 "
             "(torch.ops.aten._flash_attention_backward), same inputs, median of the timed runs; in "
             "parentheses the other kernel timed in the same rounds.", "",
             "| head_dim | causal | tokens | segments | ours checked TFLOP/s | ours unchecked | FA2 | checked / FA2 "
             "speed | check overhead | rel. err dq / dk / dv vs FA2 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        e = r["rel_err_vs_fa2"]
        alt = r.get("alt_kernel", f"{r['alt_block_m']} rows per step")
        m32 = f" ({alt}: {r['tflops']['alt_checked']:.1f})" if "alt_checked" in r["tflops"] else ""
        lines.append(f"| {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {r['tokens']} | {r['segments']} | "
                     f"{r['tflops']['checked']:.1f}{m32} | {r['tflops']['unchecked']:.1f} | {r['tflops']['fa2']:.1f} | "
                     f"{r['ours_over_fa2']:.2f} | {100 * r['check_overhead']:+.1f} % | "
                     f"{e['dq']:.1e} / {e['dk']:.1e} / {e['dv']:.1e}{'' if r['verified'] else ' UNVERIFIED'} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libad_bench.so (scripts/gpu-check builds it)")
    ap.add_argument("--tokens", type=int, nargs="+", default=[16384, 32768, 65536])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--heads-k", type=int, default=None)
    ap.add_argument("--min-len", type=int, default=512)
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dense", action="store_true",
                    help="equal-length B x L batches against cuDNN's backward as well (module docstring)")
    ap.add_argument("--dense-shapes", nargs="+", default=["16x2048", "4x8192"], help="B x L, e.g. 16x2048")
    ap.add_argument("--json")
    ap.add_argument("--md")
    args = ap.parse_args()
    if args.heads_k is None:
        args.heads_k = args.heads
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    lib = load_lib(args.lib)
    record = Record(lib)
    device = torch.cuda.get_device_name()
    rows = bench_dense(lib, args, record) if args.dense else bench(lib, args, gen, record)
    result = {"device": device, "torch": torch.__version__, "mode": "dense" if args.dense else "varlen", "rows": rows}
    if args.dense:
        result["cuda"], result["cudnn"] = torch.version.cuda, torch.backends.cudnn.version()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.md:
        with open(args.md, "w") as f:
            f.write(markdown_dense(rows, device) if args.dense else markdown(rows, device))
    ok = all(r["verified"] for r in rows)
    print("all verified" if ok else "SOME ROWS UNVERIFIED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
