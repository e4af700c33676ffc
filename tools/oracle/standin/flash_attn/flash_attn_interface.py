"""flash-attn's attention entry points, answered by PyTorch's bundled FA2 kernels.

Nothing is checked or emulated here: the arguments go to `torch.ops.aten._flash_attention_forward`
as the caller passed them (cu_seqlens of any dtype, device or shape, max_seqlen as an int or a
0-d tensor), so whatever the kernel's own checks raise, or the kernel does, is what the oracle
records. The backward is PyTorch's autograd formula for that op (`_flash_attention_backward`).

What PyTorch's FA2 cannot express raises `NotRepresentable` (a logit softcap, a paged KV
cache): the oracle then records the case as not measured, never as an outcome.

In the oracle's `--dry-cpu` mode (ORACLE_DRY_CPU=1) the calls go to a plain PyTorch attention
instead (tools/oracle/dry_attention.py): a test of the harness, never a measurement.

The parameter lists follow flash-attn's public API; transformers inspects them
(`"window_size" in inspect.signature(flash_attn_func).parameters`), and `softcap` only exists
from flash-attn 2.6.0 (a release before it raises TypeError on the keyword, as the real one does).
"""

import importlib.metadata
import os

import torch


class NotRepresentable(Exception):
    """The call needs a feature PyTorch's bundled FA2 does not have."""


def _release():
    parts = []
    for piece in importlib.metadata.version("flash_attn").split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


DRY = os.environ.get("ORACLE_DRY_CPU") == "1"


def _forward(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, softmax_scale, causal, window_size, softcap,
             alibi_slopes, seqused_k=None):
    if softcap:
        raise NotRepresentable(f"softcap={softcap}: PyTorch's bundled FA2 has no logit softcap")
    left, right = window_size
    if DRY:
        from dry_attention import attention  # tools/oracle/dry_attention.py (on sys.path in dry runs)
        return attention(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale, causal, (left, right), seqused_k)
    out = torch.ops.aten._flash_attention_forward(
        q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, bool(causal), False,
        scale=softmax_scale, window_size_left=int(left), window_size_right=int(right),
        seqused_k=seqused_k, alibi_slopes=alibi_slopes)
    return out[0]


if _release() >= (2, 6, 0):
    def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                        softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
        """q: (B, Lq, H, D), k/v: (B, Lk, Hk, D) -> (B, Lq, H, D)."""
        return _forward(q, k, v, None, None, q.shape[1], k.shape[1], dropout_p, softmax_scale, causal,
                        window_size, softcap, alibi_slopes)

    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                               softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                               alibi_slopes=None, deterministic=False, return_attn_probs=False,
                               block_table=None):
        """q: (total_q, H, D), k/v: (total_k, Hk, D) -> (total_q, H, D)."""
        if block_table is not None:
            raise NotRepresentable("block_table: PyTorch's bundled FA2 has no paged KV cache")
        return _forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                        softmax_scale, causal, window_size, softcap, alibi_slopes)
else:
    def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                        alibi_slopes=None, deterministic=False, return_attn_probs=False):
        """q: (B, Lq, H, D), k/v: (B, Lk, Hk, D) -> (B, Lq, H, D)."""
        return _forward(q, k, v, None, None, q.shape[1], k.shape[1], dropout_p, softmax_scale, causal,
                        window_size, 0.0, alibi_slopes)

    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                               softmax_scale=None, causal=False, window_size=(-1, -1), alibi_slopes=None,
                               deterministic=False, return_attn_probs=False, block_table=None):
        """q: (total_q, H, D), k/v: (total_k, Hk, D) -> (total_q, H, D)."""
        if block_table is not None:
            raise NotRepresentable("block_table: PyTorch's bundled FA2 has no paged KV cache")
        return _forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                        softmax_scale, causal, window_size, 0.0, alibi_slopes)


def varlen_with_seqused_k(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k,
                          softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0):
    """The oracle's explicit-varlen entry (batch files may pass FA2's `seqused_k`)."""
    return _forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, 0.0, softmax_scale, causal,
                    window_size, softcap, None, seqused_k=seqused_k)


def flash_attn_with_kvcache(*args, **kwargs):
    raise NotRepresentable("flash_attn_with_kvcache: not provided by the oracle's stand-in")


def flash_attn_qkvpacked_func(*args, **kwargs):
    raise NotRepresentable("packed qkv/kv entry points: not provided by the oracle's stand-in")


flash_attn_kvpacked_func = flash_attn_qkvpacked_func
flash_attn_varlen_qkvpacked_func = flash_attn_qkvpacked_func
flash_attn_varlen_kvpacked_func = flash_attn_qkvpacked_func
