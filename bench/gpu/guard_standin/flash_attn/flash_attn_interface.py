"""flash-attn 2.x signatures over torch.ops.aten._flash_attention_forward. Shapes: varlen q
(total_q, H, D), k/v (total_k, Hk, D), cu_seqlens (N + 1,); dense q (B, Lq, H, D)."""
import math

import torch


def _window(window_size):
    left, right = window_size
    return (left if left >= 0 else None), (right if right >= 0 else None)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, deterministic=False,
                           return_attn_probs=False, block_table=None):
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    left, right = _window(window_size)
    # flash-attn's own wrapper turns max_seqlen into an int the same way (int(), a sync for
    # a 0-d tensor)
    return torch.ops.aten._flash_attention_forward(
        q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k), dropout_p, causal,
        False, scale=scale, window_size_left=left, window_size_right=right)[0]


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    left, right = _window(window_size)
    return torch.ops.aten._flash_attention_forward(
        q, k, v, None, None, q.shape[1], k.shape[1], dropout_p, causal, False, scale=scale,
        window_size_left=left, window_size_right=right)[0]


def flash_attn_with_kvcache(*args, **kwargs):
    """Imported by transformers >= 5 with the other entry points; PyTorch bundles no KV-cache
    kernel, and the guard's measurements never decode, so a call says so instead of running."""
    raise NotImplementedError("flash_attn_with_kvcache: not provided by this stand-in (PyTorch bundles no KV-cache kernel)")
