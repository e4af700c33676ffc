"""Stand-in for flash_attn.flash_attn_interface: records the arguments, computes nothing.

The parameter lists follow flash-attn 2.6.3's public API (transformers inspects them, e.g.
`"window_size" in inspect.signature(flash_attn_func).parameters`). With
`_recorder.COMPUTE` set (generate runs), attention is computed in plain torch with FA2's
semantics: causal mask aligned bottom-right, window (left, right) around that diagonal,
softcap before the softmax, GQA by head groups.
"""

import math

import torch

from . import _recorder


def _reference_attention(q, k, v, causal, window_size, softcap, softmax_scale):
    """q: (Lq, H, D), k/v: (Lk, Hk, D) -> (Lq, H, D), in float32."""
    lq, heads, dim = q.shape
    lk, kv_heads = k.shape[0], k.shape[1]
    if lq == 0 or lk == 0:
        return torch.zeros_like(q)
    group = heads // kv_heads
    qf = q.float().transpose(0, 1)                                   # (H, Lq, D)
    kf = k.float().repeat_interleave(group, dim=1).transpose(0, 1)   # (H, Lk, D)
    vf = v.float().repeat_interleave(group, dim=1).transpose(0, 1)
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(dim)
    scores = torch.matmul(qf, kf.transpose(1, 2)) * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    row = torch.arange(lq).unsqueeze(1) + (lk - lq)   # diagonal, bottom-right aligned
    col = torch.arange(lk).unsqueeze(0)
    allowed = torch.ones(lq, lk, dtype=torch.bool)
    left, right = window_size
    if causal:
        right = 0
    if right >= 0:
        allowed &= col <= row + right
    if left >= 0:
        allowed &= col >= row - left
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.matmul(probs, vf).transpose(0, 1).to(q.dtype)


def _valid_cu(cu, rows):
    values = cu.reshape(-1).tolist()
    return (
        cu.ndim == 1 and len(values) >= 2 and values[0] == 0 and values[-1] <= rows
        and all(a <= b for a, b in zip(values, values[1:]))
    )


def flash_attn_func(
    q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
):
    """q: (B, Lq, H, D), k/v: (B, Lk, Hk, D) -> (B, Lq, H, D)."""
    _recorder.record(
        "flash_attn_func",
        q_shape=_recorder.shape_of(q), k_shape=_recorder.shape_of(k), v_shape=_recorder.shape_of(v),
        q_dtype=str(q.dtype).replace("torch.", ""),
        causal=bool(causal), window_size=list(window_size), softcap=softcap,
        dropout_p=dropout_p, softmax_scale=softmax_scale, deterministic=deterministic,
    )
    if not _recorder.COMPUTE:
        return torch.zeros_like(q)
    out = torch.stack([
        _reference_attention(q[b], k[b], v[b], causal, tuple(window_size), softcap, softmax_scale)
        for b in range(q.shape[0])
    ])
    return out


def flash_attn_varlen_func(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
    deterministic=False, return_attn_probs=False, block_table=None,
):
    """q: (total_q, H, D), k/v: (total_k, Hk, D), cu_seqlens_*: (N + 1,) -> (total_q, H, D)."""
    _recorder.record(
        "flash_attn_varlen_func",
        q_shape=_recorder.shape_of(q), k_shape=_recorder.shape_of(k), v_shape=_recorder.shape_of(v),
        q_dtype=str(q.dtype).replace("torch.", ""),
        cu_seqlens_q=_recorder.describe_int_tensor(cu_seqlens_q),
        cu_seqlens_k=_recorder.describe_int_tensor(cu_seqlens_k),
        max_seqlen_q=_recorder.describe_max_seqlen(max_seqlen_q),
        max_seqlen_k=_recorder.describe_max_seqlen(max_seqlen_k),
        causal=bool(causal), window_size=list(window_size), softcap=softcap,
        dropout_p=dropout_p, softmax_scale=softmax_scale, deterministic=deterministic,
        block_table=block_table is not None,
    )
    out = torch.zeros_like(q)
    if not _recorder.COMPUTE:
        return out
    if not (_valid_cu(cu_seqlens_q, q.shape[0]) and _valid_cu(cu_seqlens_k, k.shape[0])):
        return out
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    if len(cq) != len(ck):
        return out
    for i in range(len(cq) - 1):
        out[cq[i]:cq[i + 1]] = _reference_attention(
            q[cq[i]:cq[i + 1]], k[ck[i]:ck[i + 1]], v[ck[i]:ck[i + 1]],
            causal, tuple(window_size), softcap, softmax_scale,
        )
    return out


def flash_attn_with_kvcache(*args, **kwargs):
    raise NotImplementedError("stand-in flash_attn: flash_attn_with_kvcache is not provided")


def flash_attn_qkvpacked_func(*args, **kwargs):
    raise NotImplementedError("stand-in flash_attn: qkvpacked functions are not provided")


flash_attn_kvpacked_func = flash_attn_qkvpacked_func
flash_attn_varlen_qkvpacked_func = flash_attn_qkvpacked_func
flash_attn_varlen_kvpacked_func = flash_attn_qkvpacked_func
