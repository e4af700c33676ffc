#!/usr/bin/env python3
"""Times attn-doctor's CUDA kernels against PyTorch on the same GPU, same inputs, same run.

  attention: our varlen forward (checked and unchecked; the kernel the launcher picks, i.e.
             wgmma on an H100/H200, plus the mma.sync kernel for comparison) vs FA2 varlen
             (torch.ops.aten._flash_attention_forward), bf16, head_dim 64 / 128 (--head-dims: also
             96 / 192 / 256, mma.sync on every GPU), causal and not, 16k-64k total tokens in
             sequences of 512-4096; TFLOP/s over the exact count of visible (query, key)
             pairs, 4 * H * D FLOP each.
  memory:    unpad gather, pad scatter and rotary (checked and unchecked) vs the GPU's
             device-to-device copy bandwidth (bytes read + written).

Method (METHOD.md): outputs verified against FA2 / the copy before timing; random inputs;
CUDA events; warm-up; the variants of one configuration interleaved round-robin; median
of many runs. Writes JSON (--json), a Markdown table (--md) and an SVG chart (--svg).
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

import torch

ELEM = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}


def load_lib(path):
    lib = ctypes.CDLL(path)
    P, I, I64, F = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float
    I32 = ctypes.c_int32
    lib.ad_last_error.restype = ctypes.c_char_p
    lib.ad_record_size.restype = ctypes.c_size_t
    lib.ad_varlen_fwd.argtypes = [I, P, I64, P, P, P, P, I64, P, P, I32, I32, I32, I32, I32, I32, F, I, I32, I32,
                                  F, I, I, P, P]
    lib.ad_index_copy.argtypes = [I, P, I64, P, I64, I64, P, I64, I, P, P]
    lib.ad_rotary.argtypes = [I, P, I64, I32, I32, P, P, I64, I32, I, P, P, I32, I32, I, I, P, P]
    lib.ad_varlen_fwd_kernel_name.argtypes = [I, I32, I, I]
    lib.ad_varlen_fwd_kernel_name.restype = ctypes.c_char_p
    lib.ad_empty_record.argtypes = [P]
    lib.ad_record_fields.argtypes = [P, P]
    return lib


class Record:
    """A device violation record (bytes on the GPU), reset before each checked launch."""

    def __init__(self, lib):
        self.lib = lib
        self.size = lib.ad_record_size()
        host = (ctypes.c_ubyte * self.size)()
        lib.ad_empty_record(ctypes.cast(host, ctypes.c_void_p))
        self.empty = torch.tensor(list(bytes(host)), dtype=torch.uint8)
        self.dev = self.empty.cuda()
        self.empty_dev = self.empty.cuda()

    def reset(self):
        # A device-to-device copy, enqueued like the launch. (A copy from pageable host memory
        # makes the host wait for the GPU to drain first, so the GPU then idles for a launch
        # latency before the checked kernel: that gap was counted as check overhead.)
        self.dev.copy_(self.empty_dev)

    def fields(self):
        host = bytes(self.dev.cpu().tolist())
        buf = (ctypes.c_ubyte * self.size).from_buffer_copy(host)
        out = (ctypes.c_int64 * 5)()
        self.lib.ad_record_fields(ctypes.cast(buf, ctypes.c_void_p), ctypes.cast(out, ctypes.c_void_p))
        return {"count": out[0], "buffer": out[1], "index": out[2], "bound": out[3], "min_index": out[4]}


def check_rc(lib, rc):
    if rc != 0:
        raise RuntimeError(lib.ad_last_error().decode())


def segment_lengths(total, lo, hi, gen):
    """Lengths in [lo, hi] summing to `total` (total >= lo)."""
    lens = []
    while sum(lens) < total:
        lens.append(int(torch.randint(lo, hi + 1, (1,), generator=gen)))
    excess = sum(lens) - total
    lens[-1] -= excess
    if lens[-1] < lo:  # fold the short tail into segments with room
        short = lens.pop()
        for i in range(len(lens)):
            room = hi - lens[i]
            take = min(room, short)
            lens[i] += take
            short -= take
            if short == 0:
                break
        assert short == 0
    return lens


def visible_pairs(lens, causal):
    return sum(L * (L + 1) // 2 if causal else L * L for L in lens)


def time_round_robin(variants, reps, warmup):
    """variants: {name: fn}. Returns {name: [ms...]}, interleaving the variants."""
    for _ in range(warmup):
        for fn in variants.values():
            fn()
    torch.cuda.synchronize()
    events = {n: [] for n in variants}
    for _ in range(reps):
        for n, fn in variants.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            events[n].append((s, e))
    torch.cuda.synchronize()
    return {n: [s.elapsed_time(e) for s, e in ev] for n, ev in events.items()}


def bench_attention(lib, args, gen, record):
    rows = []
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    for head_dim in args.head_dims:
        for causal in (False, True):
            for total in args.tokens:
                lens = segment_lengths(total, args.min_len, args.max_len, gen)
                cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device="cuda")
                max_len = max(lens)
                H = args.heads
                q = torch.randn(total, H, head_dim, dtype=torch.bfloat16, device="cuda", generator=None)
                k = torch.randn(total, H, head_dim, dtype=torch.bfloat16, device="cuda")
                v = torch.randn(total, H, head_dim, dtype=torch.bfloat16, device="cuda")
                out = torch.empty_like(q)
                lse = torch.empty(H, total, dtype=torch.float32, device="cuda")
                scale = 1.0 / math.sqrt(head_dim)

                def ours(checked, which=0):
                    if checked:
                        record.reset()
                    check_rc(lib, lib.ad_varlen_fwd(
                        0, q.data_ptr(), total, out.data_ptr(), lse.data_ptr(), k.data_ptr(), v.data_ptr(), total,
                        cu.data_ptr(), cu.data_ptr(), len(lens), H, H, head_dim, max_len, max_len, scale,
                        int(causal), -1, -1, 0.0, int(checked), which, record.dev.data_ptr() if checked else None,
                        stream))

                def fa2():
                    return torch.ops.aten._flash_attention_forward(
                        q, k, v, cu, cu, max_len, max_len, 0.0, causal, False, scale=scale)

                # verify before timing: the default kernel (wgmma on Hopper) and the mma.sync one
                ref, ref_lse = fa2()[:2]
                errs = {}
                verified = True
                for name, which in (("default", 0), ("mma_sync", 1)):
                    out.fill_(float("nan"))
                    lse.fill_(float("nan"))
                    ours(True, which)
                    torch.cuda.synchronize()
                    rec = record.fields()
                    e = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                    errs[name] = e
                    if not (e < 2e-2) or rec["count"] != 0:
                        verified = False
                        print(f"VERIFICATION FAILED ({name}): d={head_dim} causal={causal} total={total} rel_err={e} "
                              f"record={rec}", flush=True)
                    if name == "default":
                        lse_err = float("nan")
                        if ref_lse.shape == lse.shape:
                            lse_err = (lse - ref_lse).abs().max().item()
                        kernel_name = lib.ad_varlen_fwd_kernel_name(0, head_dim, 0, 1).decode()
                err = errs["default"]
                variants = {"checked": lambda: ours(True), "unchecked": lambda: ours(False),
                            "mma_checked": lambda: ours(True, 1), "mma_unchecked": lambda: ours(False, 1), "fa2": fa2}
                if args.wgmma_alt and kernel_name.startswith("varlen_fwd_wgmma"):  # the other wgmma variant
                    out.fill_(float("nan"))
                    ours(True, 5)
                    torch.cuda.synchronize()
                    alt_err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                    errs["wgmma_alt"] = alt_err
                    if not (alt_err < 2e-2) or record.fields()["count"] != 0:
                        print(f"WGMMA ALT VERIFICATION FAILED: rel_err={alt_err}", flush=True)
                        verified = False
                    variants["wgmma_alt_checked"] = lambda: ours(True, 5)
                    variants["wgmma_alt_unchecked"] = lambda: ours(False, 5)
                def extra_variant(name, which, checked):
                    """Kernel `which` run once and compared with FA2's output (and, checked, with an
                    empty record), then timed beside the others; False when it does not verify."""
                    out.fill_(float("nan"))
                    ours(checked, which)
                    torch.cuda.synchronize()
                    e = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                    errs[name] = e
                    variants[name] = (lambda w, c: lambda: ours(c, w))(which, checked)
                    if not (e < 2e-2) or (checked and record.fields()["count"] != 0):
                        print(f"VERIFICATION FAILED ({name}): rel_err={e}", flush=True)
                        return False
                    return True

                extra = []
                if args.wgmma_ws and kernel_name.startswith("varlen_fwd_wgmma_ws"):
                    # head dim 128: the default is the warp-specialised kernel; the wgmma kernel it
                    # replaced (4), and the warp-specialised one without ping-pong (9)
                    extra += [("wgmma_checked", 4, True), ("wgmma_unchecked", 4, False), ("ws_alt_checked", 9, True)]
                if args.ws_d64 and head_dim == 64 and kernel_name.startswith("varlen_fwd_wgmma<"):
                    # the warp-specialised kernel at head dim 64 (8; bf16, a build with
                    # ATTN_DOCTOR_WGMMA_WS_D64) beside the default (the wgmma kernel)
                    extra += [("ws_checked", 8, True), ("ws_unchecked", 8, False)]
                for name, which, checked in extra:
                    verified = extra_variant(name, which, checked) and verified
                if args.one_launch:  # the checked forms in one launch (a build with ATTN_DOCTOR_FWD_ONE_LAUNCH)
                    for name, which in (("one_checked", 6 if kernel_name.startswith("varlen_fwd_wgmma") else 7),
                                        ("mma_one_checked", 7)):
                        out.fill_(float("nan"))
                        ours(True, which)
                        torch.cuda.synchronize()
                        one_err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                        errs[name] = one_err
                        if not (one_err < 2e-2) or record.fields()["count"] != 0:
                            print(f"ONE-LAUNCH VERIFICATION FAILED ({name}): rel_err={one_err}", flush=True)
                            verified = False
                        variants[name] = (lambda w: lambda: ours(True, w))(which)
                if args.alt:  # the tensor-core kernel's other warp layout
                    out.fill_(float("nan"))
                    ours(True, 3)
                    torch.cuda.synchronize()
                    alt_err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                    if not (alt_err < 2e-2) or record.fields()["count"] != 0:
                        print(f"ALT VERIFICATION FAILED: rel_err={alt_err}", flush=True)
                        verified = False
                    variants["alt_checked"] = lambda: ours(True, 3)
                    variants["alt_unchecked"] = lambda: ours(False, 3)
                times = time_round_robin(variants, args.reps, args.warmup)
                flop = 4.0 * H * head_dim * visible_pairs(lens, causal)
                med = {n: statistics.median(t) for n, t in times.items()}
                spread = {n: (min(t), max(t)) for n, t in times.items()}
                row = {
                    "head_dim": head_dim, "causal": causal, "tokens": total, "heads": H, "segments": len(lens),
                    "min_len": min(lens), "max_len": max_len, "gflop": flop / 1e9,
                    "ms": med, "ms_min_max": spread,
                    "tflops": {n: flop / (m * 1e-3) / 1e12 for n, m in med.items()},
                    "rel_err_vs_fa2": err, "rel_err_vs_fa2_mma_sync": errs["mma_sync"],
                    "lse_max_abs_err_vs_fa2": lse_err, "verified": verified, "kernel": kernel_name,
                }
                row["ours_over_fa2"] = row["tflops"]["checked"] / row["tflops"]["fa2"]
                row["check_overhead"] = med["checked"] / med["unchecked"] - 1.0
                row["mma_check_overhead"] = med["mma_checked"] / med["mma_unchecked"] - 1.0
                row["ours_over_mma_sync"] = med["mma_checked"] / med["checked"]
                if "one_checked" in med:
                    row["one_launch_check_overhead"] = med["one_checked"] / med["unchecked"] - 1.0
                    row["mma_one_launch_check_overhead"] = med["mma_one_checked"] / med["mma_unchecked"] - 1.0
                    print(f"     one launch: checked {row['tflops']['one_checked']:6.1f} TFLOP/s overhead "
                          f"{100 * row['one_launch_check_overhead']:+.1f}%; mma.sync checked "
                          f"{row['tflops']['mma_one_checked']:6.1f} overhead "
                          f"{100 * row['mma_one_launch_check_overhead']:+.1f}%", flush=True)
                rows.append(row)
                if args.alt:
                    print(f"     alt layout: checked {row['tflops']['alt_checked']:6.1f} unchecked "
                          f"{row['tflops']['alt_unchecked']:6.1f} TFLOP/s", flush=True)
                if "wgmma_checked" in med:
                    row["ws_over_wgmma_checked"] = med["wgmma_checked"] / med["checked"]
                    row["ws_over_wgmma_unchecked"] = med["wgmma_unchecked"] / med["unchecked"]
                    print(f"     wgmma kernel (before): checked {row['tflops']['wgmma_checked']:6.1f} unchecked "
                          f"{row['tflops']['wgmma_unchecked']:6.1f} TFLOP/s; warp-specialised / wgmma: checked "
                          f"{row['ws_over_wgmma_checked']:.2f}x unchecked {row['ws_over_wgmma_unchecked']:.2f}x; "
                          f"without ping-pong (checked) {row['tflops']['ws_alt_checked']:6.1f}", flush=True)
                if "ws_checked" in med and head_dim == 64:
                    print(f"     warp-specialised d64: checked {row['tflops']['ws_checked']:6.1f} "
                          f"({med['checked'] / med['ws_checked']:.3f}x the default) unchecked "
                          f"{row['tflops']['ws_unchecked']:6.1f} ({med['unchecked'] / med['ws_unchecked']:.3f}x)", flush=True)
                if "wgmma_alt_checked" in med:
                    row["wgmma_alt_check_overhead"] = med["wgmma_alt_checked"] / med["wgmma_alt_unchecked"] - 1.0
                    print(f"     wgmma alt variant: checked {row['tflops']['wgmma_alt_checked']:6.1f} unchecked "
                          f"{row['tflops']['wgmma_alt_unchecked']:6.1f} TFLOP/s overhead "
                          f"{100 * row['wgmma_alt_check_overhead']:+.1f}%", flush=True)
                print(f"attn d={head_dim:3d} causal={int(causal)} tokens={total:6d} segs={len(lens):3d} "
                      f"ours {row['tflops']['checked']:6.1f} (unchecked {row['tflops']['unchecked']:6.1f}) "
                      f"mma.sync {row['tflops']['mma_checked']:6.1f} ({row['tflops']['mma_unchecked']:6.1f}) "
                      f"FA2 {row['tflops']['fa2']:6.1f} TFLOP/s  ratio {row['ours_over_fa2']:.2f} "
                      f"overhead {100 * row['check_overhead']:+.1f}% (mma.sync {100 * row['mma_check_overhead']:+.1f}%) "
                      f"err {err:.1e}{'' if verified else '  UNVERIFIED'}", flush=True)
                del q, k, v, out, lse
    return rows


def bench_memory(lib, args, gen, record):
    """Gather / scatter / rotary on the padded layout of the largest attention size."""
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    H, D = args.heads, 128
    total = max(args.tokens)
    lens = segment_lengths(total, args.min_len, args.max_len, gen)
    S = max(lens)
    B = len(lens)
    row_bytes = H * D * 2
    mask = torch.zeros(B, S, dtype=torch.bool)
    for b, L in enumerate(lens):
        mask[b, :L] = True
    indices = mask.flatten().nonzero().flatten().to(torch.int64).cuda()
    n = indices.numel()
    padded = torch.randn(B * S, H, D, dtype=torch.bfloat16, device="cuda")
    packed = torch.empty(n, H, D, dtype=torch.bfloat16, device="cuda")
    repadded = torch.zeros_like(padded)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32)
    cu_dev = cu.cuda()
    half = D // 2
    pos = torch.arange(S, dtype=torch.float32)
    inv = 10000.0 ** (-torch.arange(half, dtype=torch.float32) * 2 / D)
    ang = pos[:, None] * inv[None, :]
    cos, sin = ang.cos().cuda(), ang.sin().cuda()
    copy_src = torch.randn(n, H, D, dtype=torch.bfloat16, device="cuda")
    copy_dst = torch.empty_like(copy_src)

    def gather(checked):
        if checked:
            record.reset()
        check_rc(lib, lib.ad_index_copy(0, padded.data_ptr(), B * S, packed.data_ptr(), n, row_bytes,
                                        indices.data_ptr(), n, int(checked),
                                        record.dev.data_ptr() if checked else None, stream))

    def scatter(checked):
        if checked:
            record.reset()
        check_rc(lib, lib.ad_index_copy(1, packed.data_ptr(), n, repadded.data_ptr(), B * S, row_bytes,
                                        indices.data_ptr(), n, int(checked),
                                        record.dev.data_ptr() if checked else None, stream))

    cu_host = (ctypes.c_int32 * len(cu))(*cu.tolist())

    def rotary(checked):
        if checked:
            record.reset()
        check_rc(lib, lib.ad_rotary(0, packed.data_ptr(), n, H, D, cos.data_ptr(), sin.data_ptr(), S, D, 0,
                                    cu_dev.data_ptr(), ctypes.cast(cu_host, ctypes.c_void_p), B, S, 0, int(checked),
                                    record.dev.data_ptr() if checked else None, stream))

    # verify
    gather(True)
    torch.cuda.synchronize()
    assert record.fields()["count"] == 0
    assert torch.equal(packed, padded.view(B * S, H, D)[indices]), "gather differs from torch indexing"
    scatter(True)
    torch.cuda.synchronize()
    assert record.fields()["count"] == 0
    assert torch.equal(repadded[indices], packed), "scatter differs"
    ref = packed.float().clone()
    rotary(True)
    torch.cuda.synchronize()
    assert record.fields()["count"] == 0
    x0, x1 = ref[..., :half], ref[..., half:]
    pos_tok = torch.cat([torch.arange(L) for L in lens]).cuda()
    c, s = cos[pos_tok][:, None, :], sin[pos_tok][:, None, :]
    expect = torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)
    rot_err = (packed.float() - expect).abs().max().item()
    assert rot_err < 3e-2, f"rotary differs: {rot_err}"

    moved = 2 * n * row_bytes
    times = time_round_robin({
        "copy": lambda: copy_dst.copy_(copy_src),
        "gather_checked": lambda: gather(True),
        "gather_unchecked": lambda: gather(False),
        "scatter_checked": lambda: scatter(True),
        "scatter_unchecked": lambda: scatter(False),
        "rotary_checked": lambda: rotary(True),
        "rotary_unchecked": lambda: rotary(False),
    }, args.reps * 2, args.warmup)
    med = {k: statistics.median(v) for k, v in times.items()}
    gbps = {k: moved / (m * 1e-3) / 1e9 for k, m in med.items()}
    result = {"rows": n, "row_bytes": row_bytes, "bytes_moved": moved, "ms": med, "gb_per_s": gbps,
              "fraction_of_copy": {k: g / gbps["copy"] for k, g in gbps.items()}, "rotary_max_abs_err": rot_err}
    for k in med:
        print(f"mem {k:18s} {med[k]:7.3f} ms {gbps[k]:7.0f} GB/s  {100 * gbps[k] / gbps['copy']:5.1f}% of copy",
              flush=True)
    return result


def write_svg(rows, path, device_name):
    """TFLOP/s against total tokens, ours (checked) vs FA2, one panel per (head_dim, causal)."""
    panels = sorted({(r["head_dim"], r["causal"]) for r in rows})
    W, Hp, pad = 330, 240, 45
    width = W * len(panels) + 20
    ymax = max(max(r["tflops"]["fa2"], r["tflops"]["checked"], r["tflops"].get("mma_checked", 0)) for r in rows) * 1.15
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{Hp + 70}" font-family="sans-serif" '
           f'font-size="11">',
           f'<text x="10" y="16" font-size="13">Varlen attention forward, bf16, {device_name}: TFLOP/s vs total '
           f'tokens (blue: attn-doctor checked, wgmma; grey: attn-doctor checked, mma.sync; red dashed: '
           f'FA2 varlen)</text>']
    for i, (d, causal) in enumerate(panels):
        x0, y0 = 10 + i * W + pad, 40
        pw, ph = W - pad - 15, Hp - 40
        pts = sorted((r for r in rows if r["head_dim"] == d and r["causal"] == causal), key=lambda r: r["tokens"])
        tmin, tmax = min(r["tokens"] for r in pts), max(r["tokens"] for r in pts)
        lx = lambda t: x0 + (0 if tmax == tmin else (math.log2(t) - math.log2(tmin)) / (math.log2(tmax) - math.log2(tmin)) * pw)
        ly = lambda v: y0 + ph - v / ymax * ph
        out.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        out.append(f'<text x="{x0 + 4}" y="{y0 + 14}">d={d} {"causal" if causal else "non-causal"}</text>')
        for tick in range(0, int(ymax) + 1, 100):
            out.append(f'<line x1="{x0 - 4}" x2="{x0}" y1="{ly(tick):.1f}" y2="{ly(tick):.1f}" stroke="#888"/>'
                       f'<text x="{x0 - 8}" y="{ly(tick) + 4:.1f}" text-anchor="end">{tick}</text>')
        for r in pts:
            out.append(f'<text x="{lx(r["tokens"]):.1f}" y="{y0 + ph + 14}" text-anchor="middle">'
                       f'{r["tokens"] // 1024}k</text>')
        series = [("checked", "#1f77b4", ""), ("fa2", "#d62728", ' stroke-dasharray="5,3"')]
        if all("mma_checked" in r["tflops"] for r in pts):
            series.insert(1, ("mma_checked", "#7f7f7f", ""))
        for key, color, dash in series:
            poly = " ".join(f'{lx(r["tokens"]):.1f},{ly(r["tflops"][key]):.1f}' for r in pts)
            out.append(f'<polyline points="{poly}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
            for r in pts:
                out.append(f'<circle cx="{lx(r["tokens"]):.1f}" cy="{ly(r["tflops"][key]):.1f}" r="3" fill="{color}"/>')
    out.append(f'<text x="10" y="{Hp + 45}">x: total tokens (sequences of 512-4096, random); y: TFLOP/s '
               f'(4 * H * D per visible query-key pair); medians of interleaved runs timed with CUDA events</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def write_md(att, mem, path, meta):
    kernels = sorted({r.get("kernel", "default").split("<")[0] for r in att})
    lines = [f"### Varlen attention forward, bf16 ({meta['device']})", "",
             f"ours = the kernel the launcher picks on this GPU ({', '.join(kernels)}); mma.sync = the sm_80 "
             "tensor-core kernel (the fallback), same run, same inputs.", "",
             "| head_dim | causal | tokens | segments | ours checked TFLOP/s | ours unchecked | mma.sync checked | "
             "mma.sync unchecked | FA2 | ours/FA2 | ours/mma.sync | check overhead (ours) | check overhead (mma.sync) | "
             "rel. err vs FA2 |",
             "|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in att:
        lines.append(f"| {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {r['tokens']} | {r['segments']} | "
                     f"{r['tflops']['checked']:.1f} | {r['tflops']['unchecked']:.1f} | "
                     f"{r['tflops']['mma_checked']:.1f} | {r['tflops']['mma_unchecked']:.1f} | {r['tflops']['fa2']:.1f} | "
                     f"{100 * r['ours_over_fa2']:.0f}% | {r['ours_over_mma_sync']:.2f}x | "
                     f"{100 * r['check_overhead']:+.1f}% | {100 * r['mma_check_overhead']:+.1f}% | "
                     f"{r['rel_err_vs_fa2']:.1e} |")
    alt = [r for r in att if "wgmma_alt_checked" in r["tflops"]]
    if alt:
        lines += ["", "The wgmma kernel's other variant (`--wgmma-alt`: P·V with P through shared memory instead of registers), "
                  "same run:", "",
                  "| head_dim | causal | tokens | alt checked TFLOP/s | alt unchecked | alt check overhead | "
                  "default checked | alt / default |", "|---:|:---:|---:|---:|---:|---:|---:|---:|"]
        for r in alt:
            lines.append(f"| {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {r['tokens']} | "
                         f"{r['tflops']['wgmma_alt_checked']:.1f} | {r['tflops']['wgmma_alt_unchecked']:.1f} | "
                         f"{100 * r['wgmma_alt_check_overhead']:+.1f}% | {r['tflops']['checked']:.1f} | "
                         f"{r['tflops']['wgmma_alt_checked'] / r['tflops']['checked']:.2f}x |")
    if mem:
        lines += ["", f"### Memory-bound stages ({mem['rows']} rows of {mem['row_bytes']} B, bytes read + written)", "",
                  "| kernel | ms | GB/s | % of copy |", "|---|---:|---:|---:|"]
        for k in mem["ms"]:
            lines.append(f"| {k} | {mem['ms'][k]:.3f} | {mem['gb_per_s'][k]:.0f} | "
                         f"{100 * mem['fraction_of_copy'][k]:.0f}% |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libad_bench.so")
    ap.add_argument("--tokens", type=int, nargs="+", default=[16384, 32768, 65536])
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--min-len", type=int, default=512)
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--alt", action="store_true", help="also time the tensor-core kernel's other warp layout")
    ap.add_argument("--wgmma-ws", action="store_true",
                    help="at head dim 128 (where the default is the warp-specialised wgmma kernel) also time the "
                         "wgmma kernel it replaced and the warp-specialised kernel without ping-pong")
    ap.add_argument("--ws-d64", action="store_true",
                    help="at head dim 64 also time the warp-specialised kernel (a build with ATTN_DOCTOR_WGMMA_WS_D64)")
    ap.add_argument("--one-launch", action="store_true",
                    help="also time the checked forms in one launch, as before the two-launch form (a build with "
                         "ATTN_DOCTOR_FWD_ONE_LAUNCH)")
    ap.add_argument("--wgmma-alt", action="store_true",
                    help="also time the wgmma kernel's other variant (needs ATTN_DOCTOR_WGMMA_ALT)")
    ap.add_argument("--block-m-d256", type=int, default=128, choices=(64, 128),
                    help="FA2's query rows per CTA at head dim 256: 128 (A100's tile) or 64 (H100's)")
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--svg")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    lib = load_lib(args.lib)
    lib.ad_set_fwd_block_m_d256.argtypes = [ctypes.c_int32]
    lib.ad_set_fwd_block_m_d256(args.block_m_d256)
    record = Record(lib)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "argv": sys.argv, "time": time.strftime("%Y-%m-%d %H:%M:%S"), "block_m_d256": args.block_m_d256}
    att = bench_attention(lib, args, gen, record)
    mem = None
    if not args.skip_memory:
        try:
            mem = bench_memory(lib, args, gen, record)
        except Exception as e:  # report, keep the attention results
            print(f"MEMORY BENCH FAILED: {e}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "attention": att, "memory": mem}, f, indent=1)
    if args.md:
        write_md(att, mem, args.md, meta)
    if args.svg:
        write_svg(att, args.svg, meta["device"])


if __name__ == "__main__":
    main()
