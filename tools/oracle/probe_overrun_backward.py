"""Where a training step's phantom rows reach the other segments' gradients (GPU, PyTorch's FA2).

A cu_seqlens whose last entry passes the packed rows by a few (cu [0, 6, 11, 19] on 16 rows,
meant [0, 6, 11, 16]) leaves the forward's intended rows right, but the backward's gradients
wrong far beyond the last segment. This probe separates the candidate paths by swapping one
ingredient at a time between the broken call and the intended one, all through
aten::_flash_attention_forward / _flash_attention_backward (the kernels users reach):

  as_run        forward and backward with the broken cu_seqlens, as autograd runs them
  lse           which (head, row) entries of the forward's logsumexp differ from the intended
  bwd_only      the intended forward's out and logsumexp, the broken cu_seqlens in the backward
  fwd_only      the broken forward's out and logsumexp, the intended cu_seqlens in the backward
  fwd_lse_only  the broken forward's logsumexp alone (the intended out and cu_seqlens)
  fwd_out_only  the broken forward's out alone (the intended logsumexp and cu_seqlens)
  padded        as_run with q, k, v, out, do and dout sliced from allocations 3 rows longer
                (zero-filled), so the phantom rows read zeros inside the caller's memory
  mha           as_run with as many key heads as query heads (no GQA expansion of dk/dv)

Each line gives, per tensor, the rows (of 16) that differ from the intended call's, and the
largest difference. Nothing is emulated: the kernels run as PyTorch ships them.
    python3 tools/oracle/probe_overrun_backward.py [--json OUT.json]
"""

import argparse
import json

import torch

F = torch.ops.aten._flash_attention_forward
B = torch.ops.aten._flash_attention_backward
H, D, ROWS = 8, 64, 16
BAD, GOOD = [0, 6, 11, 19], [0, 6, 11, 16]


def fwd(q, k, v, cu, max_len):
    cu_t = torch.tensor(cu, dtype=torch.int32, device="cuda")
    out, lse, rng, unused, _ = F(q, k, v, cu_t, cu_t, max_len, max_len, 0.0, True, False)
    return out, lse, rng, unused


def bwd(do, q, k, v, out, lse, rng, unused, cu, max_len):
    cu_t = torch.tensor(cu, dtype=torch.int32, device="cuda")
    return B(do, q, k, v, out, lse, cu_t, cu_t, max_len, max_len, 0.0, True, rng, unused)


def inputs(hk, seed, pad=0):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def make(heads):
        full = torch.zeros(ROWS + pad, heads, D, device="cuda", dtype=torch.bfloat16)
        full[:ROWS] = torch.randn(ROWS, heads, D, generator=g, device="cuda", dtype=torch.bfloat16)
        return full[:ROWS]

    return make(H), make(hk), make(hk), make(H)


def rows_differing(a, b):
    """-> (rows whose values differ beyond bf16 rounding, largest |difference|, rows holding NaN)."""
    a, b = a.float().reshape(ROWS, -1), b.float().reshape(ROWS, -1)
    scale = max(float(b.abs().max()), 1e-6)
    diff = (a - b).abs()
    nan = torch.isnan(a).any(dim=1)
    bad = (diff > 2e-2 * scale).any(dim=1) | nan
    worst = float(torch.nan_to_num(diff, nan=float("inf")).max())
    return [int(r) for r in torch.nonzero(bad).flatten()], worst, [int(r) for r in torch.nonzero(nan).flatten()]


def describe(name, got, ref):
    rows, worst, nan = rows_differing(got, ref)
    return {"tensor": name, "rows": rows, "worst": worst, "nan_rows": nan}


def probe(hk, seed, pad=0, mode="as_run"):
    q, k, v, do = inputs(hk, seed, pad)
    out_g, lse_g, rng_g, un_g = fwd(q, k, v, GOOD, 6)
    dq_g, dk_g, dv_g = bwd(do, q, k, v, out_g, lse_g, rng_g, un_g, GOOD, 6)
    torch.cuda.synchronize()
    result = {"mode": mode, "hk": hk, "seed": seed, "pad": pad, "lse_shape": list(lse_g.shape)}
    if mode in ("as_run", "padded", "mha"):
        out_b, lse_b, rng_b, un_b = fwd(q, k, v, BAD, 8)
        if pad:  # the backward's out must sit in the same padded kind of allocation
            out_full = torch.zeros(ROWS + pad, H, D, device="cuda", dtype=out_b.dtype)
            out_full[:ROWS] = out_b
            out_b = out_full[:ROWS]
        dq, dk, dv = bwd(do, q, k, v, out_b, lse_b, rng_b, un_b, BAD, 8)
        got = {"out": out_b, "dq": dq, "dk": dk, "dv": dv}
    elif mode == "bwd_only":
        dq, dk, dv = bwd(do, q, k, v, out_g, lse_g, rng_g, un_g, BAD, 8)
        got = {"dq": dq, "dk": dk, "dv": dv}
    elif mode in ("fwd_only", "fwd_lse_only", "fwd_out_only"):
        out_b, lse_b, rng_b, un_b = fwd(q, k, v, BAD, 8)
        out_in = out_g if mode == "fwd_lse_only" else out_b
        lse_in = lse_g if mode == "fwd_out_only" else lse_b
        dq, dk, dv = bwd(do, q, k, v, out_in, lse_in, rng_g, un_g, GOOD, 6)
        got = {"out": out_b, "dq": dq, "dk": dk, "dv": dv}
    elif mode == "lse":
        out_b, lse_b, _, _ = fwd(q, k, v, BAD, 8)
        torch.cuda.synchronize()
        # logsumexp: (H, total) unpadded or (B, H, max_seqlen) padded; compare entry by entry
        diff = ~torch.isclose(lse_b.float(), lse_g.float(), atol=1e-3, rtol=0)
        result["lse_shape_broken"] = list(lse_b.shape)
        flat = diff.reshape(-1, diff.shape[-1])
        result["lse_rows_differing_per_head"] = [[int(r) for r in torch.nonzero(row).flatten()] for row in flat]
        # where the broken call's buffers sit: the phantom rows' out writes land right after out
        result["out_bytes"] = out_b.numel() * out_b.element_size()
        result["lse_minus_out_bytes"] = lse_b.data_ptr() - out_b.data_ptr()
        return result
    torch.cuda.synchronize()
    ref = {"out": out_g, "dq": dq_g, "dk": dk_g, "dv": dv_g}
    result["tensors"] = [describe(n, t, ref[n]) for n, t in got.items()]
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    runs = []
    for seed in (1, 2, 3):
        runs.append(probe(2, seed, mode="as_run"))
    runs.append(probe(2, 1, mode="lse"))
    runs.append(probe(2, 1, mode="bwd_only"))
    runs.append(probe(2, 1, mode="fwd_only"))
    runs.append(probe(2, 1, mode="fwd_lse_only"))
    runs.append(probe(2, 1, mode="fwd_out_only"))
    runs.append(probe(H, 1, mode="bwd_only"))
    runs.append(probe(2, 1, pad=3, mode="padded"))
    runs.append(probe(H, 1, mode="mha"))
    info = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "broken_cu": BAD, "intended_cu": GOOD, "heads": H, "head_dim": D, "rows": ROWS, "runs": runs}
    for r in runs:
        if "tensors" in r:
            cells = "  ".join(f"{t['tensor']}: rows {t['rows']} worst {t['worst']:.3g}"
                              + (f" nan {t['nan_rows']}" if t["nan_rows"] else "") for t in r["tensors"])
            print(f"{r['mode']:12s} hk={r['hk']} seed={r['seed']} pad={r['pad']}  {cells}")
        else:
            print(f"{r['mode']:12s} lse shape {r['lse_shape']}, out ends {r['out_bytes']} bytes after its start, "
                  f"lse starts {r['lse_minus_out_bytes']} bytes after out; rows differing per head: "
                  f"{r['lse_rows_differing_per_head']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
