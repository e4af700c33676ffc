"""Stand-in kernels with flash-attn 2.x signatures. Shapes: varlen q (total_q, H, D),
k/v (total_k, Hk, D), cu_seqlens (N + 1,) int32; dense q (B, Lq, H, D), k/v (B, Lk, Hk, D)."""
import math

import torch

CALLS = []  # one dict per call, in call order: what the caller actually passed


def _scalar(x):
    if isinstance(x, torch.Tensor):
        return int(x.item()), True
    return (int(x) if x is not None else None), False


def _record(kind, q, k, cu_q=None, cu_k=None, max_q=None, max_k=None, **extra):
    entry = {"fn": kind, "q_shape": list(q.shape), "k_shape": list(k.shape),
             "dtype": str(q.dtype).replace("torch.", ""), "device": str(q.device)}
    if cu_q is not None:
        entry["cu_seqlens_q"] = [int(x) for x in cu_q.tolist()]
        entry["cu_seqlens_q_dtype"] = str(cu_q.dtype).replace("torch.", "")
    if cu_k is not None:
        entry["cu_seqlens_k"] = [int(x) for x in cu_k.tolist()]
    if max_q is not None:
        entry["max_seqlen_q"], entry["max_seqlen_q_is_tensor"] = _scalar(max_q)
    if max_k is not None:
        entry["max_seqlen_k"], entry["max_seqlen_k_is_tensor"] = _scalar(max_k)
    entry.update(extra)
    CALLS.append(entry)
    return entry


def _check_varlen_contract(q, k, cu_seqlens_q, cu_seqlens_k):
    """The host-side checks flash-attn 2.x makes before launching (same messages), and the
    out-of-range cu_seqlens the real kernel would fault on (reported here instead)."""
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if cu.dtype != torch.int32:
            raise RuntimeError(f"{name} must have dtype int32")
        if cu.device != q.device:
            raise RuntimeError(f"{name} must be on {q.device.type.upper()}")
        if cu.dim() != 1 or not cu.is_contiguous():
            raise RuntimeError(f"{name} must be contiguous and 1-D")
    if cu_seqlens_q.numel() != cu_seqlens_k.numel():
        raise RuntimeError("cu_seqlens_k must have shape (batch_size + 1)")
    for name, cu, rows in (("cu_seqlens_q", cu_seqlens_q, q.shape[0]),
                           ("cu_seqlens_k", cu_seqlens_k, k.shape[0])):
        values = cu.tolist()
        if values[0] < 0 or values[-1] > rows or any(b < a for a, b in zip(values, values[1:])):
            raise RuntimeError("CUDA error: an illegal memory access was encountered "
                               f"(stand-in: {name} {values} on {rows} rows)")


def _math_attention(q, k, v, causal, window, softcap, scale):
    """(Lq, H, D) attention of one sequence; causal bottom-right aligned, FA2's window
    (left, right) inclusive around the diagonal, rows with no key give 0."""
    lq, h, _ = q.shape
    lk, hk, _ = k.shape
    if hk != h:
        k = k.repeat_interleave(h // hk, dim=1)
        v = v.repeat_interleave(h // hk, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(lq, device=q.device)[:, None]
    j = torch.arange(lk, device=q.device)[None, :]
    diag = i + (lk - lq)
    allowed = torch.ones(lq, lk, dtype=torch.bool, device=q.device)
    if causal:
        allowed &= j <= diag
    left, right = window
    if left >= 0:
        allowed &= j >= diag - left
    if right >= 0:
        allowed &= j <= diag + right
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.einsum("hqk,khd->qhd", p, v.float()).to(q.dtype)


def _aten_flash(q, k, v, cu_q, cu_k, max_q, max_k, causal, window, scale):
    """PyTorch's bundled FA2; None when it cannot take the call (CPU, fp32, softcap...)."""
    if not q.is_cuda or q.dtype not in (torch.float16, torch.bfloat16):
        return None
    try:
        left, right = window
        out = torch.ops.aten._flash_attention_forward(
            q, k, v, cu_q, cu_k, max_q, max_k, 0.0, causal, False, scale=scale,
            window_size_left=left if left >= 0 else None,
            window_size_right=right if right >= 0 else None)
        return out[0]
    except Exception:
        return None


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, deterministic=False,
                           return_attn_probs=False, block_table=None):
    entry = _record("varlen", q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                    causal=bool(causal), window_size=[int(w) for w in window_size],
                    softcap=float(softcap or 0.0))
    _check_varlen_contract(q, k, cu_seqlens_q, cu_seqlens_k)
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    max_q, _ = _scalar(max_seqlen_q)
    max_k, _ = _scalar(max_seqlen_k)
    out = None if softcap else _aten_flash(q, k, v, cu_seqlens_q, cu_seqlens_k, max_q, max_k,
                                           causal, tuple(window_size), scale)
    entry["backend"] = "aten-flash" if out is not None else "math"
    if out is None:
        out = torch.zeros_like(q)
        cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        for b in range(len(cq) - 1):
            qs, qe, ks, ke = cq[b], cq[b + 1], ck[b], ck[b + 1]
            if qe > qs:
                out[qs:qe] = _math_attention(q[qs:qe], k[ks:ke], v[ks:ke], causal,
                                             tuple(window_size), softcap, scale)
    return out


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    entry = _record("dense", q, k, causal=bool(causal), window_size=[int(w) for w in window_size],
                    softcap=float(softcap or 0.0))
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    out = None if softcap else _aten_flash(q, k, v, None, None, q.shape[1], k.shape[1], causal,
                                           tuple(window_size), scale)
    entry["backend"] = "aten-flash" if out is not None else "math"
    if out is None:
        out = torch.stack([_math_attention(q[b], k[b], v[b], causal, tuple(window_size), softcap,
                                           scale) for b in range(q.shape[0])])
    return out


def flash_attn_with_kvcache(*args, **kwargs):
    raise NotImplementedError("the attn-doctor flash_attn stand-in has no kv-cache kernel")
