"""Transformer Engine's DotProductAttention with qkv_format="thd": the batch document of one call.

`thd_call_document` turns the arguments one rank's `DotProductAttention.forward` received
(docs/spec/transformer-engine-thd.md) into an attn-doctor/batch@1 document: the `varlen` block
with the API `transformer_engine.dot_product_attention`, the padded offsets and
`pad_between_seqs`, and a `context_parallel` block (size, rank, comm_type, call) when the call
ran under context parallelism. The capture's hook (hooks.py, entry kind "te_dpa") calls it; a
ring-attention script that reproduces TE's sharding can call it directly for each rank.

torch is imported only to ask a process group for its rank and size.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Sequence

from . import _tensors as T

API = "transformer_engine.dot_product_attention"

# DotProductAttention.forward's parameters, in order, as TE 1.13 - 2.12 spell them (the ones a
# THD call's record needs; transformer_engine/pytorch/attention/dot_product_attention/
# dot_product_attention.py, 2.x; attention.py, 1.x).
FORWARD_PARAMETERS = (
    "query_layer", "key_layer", "value_layer", "attention_mask", "qkv_format",
    "cu_seqlens_q", "cu_seqlens_kv", "cu_seqlens_q_padded", "cu_seqlens_kv_padded",
    "max_seqlen_q", "max_seqlen_kv", "attn_mask_type",
)


def _ints(t: Any, read: Any = None) -> Optional[List[int]]:
    """A 1-D index tensor's values (through `read`, the capture's host cache, when given)."""
    if t is None:
        return None
    if T.is_tensor(t):
        return [int(x) for x in (read(t) if read is not None else T.flatten(T.host_list(t)))]
    return [int(x) for x in t]


def _scalar(x: Any) -> Optional[int]:
    value, _ = T.scalar_arg(x)
    return value


_CALLS = threading.local()


def next_call() -> int:
    """Count one DotProductAttention call of this thread (the hook calls it before the guard
    and the capture see the call): the n-th call of every rank gets the same call id."""
    n = getattr(_CALLS, "n", 0) + 1
    _CALLS.n = n
    return n


def current_call() -> int:
    return getattr(_CALLS, "n", 0)


def thd_call_document(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_kv: Any,
                      cu_seqlens_q_padded: Any = None, cu_seqlens_kv_padded: Any = None,
                      max_seqlen_q: Any = None, max_seqlen_kv: Any = None,
                      attn_mask_type: str = "padding_causal", pad_between_seqs: Optional[bool] = None,
                      cp_size: int = 1, cp_rank: int = 0, cp_comm_type: str = "p2p",
                      call: Optional[str] = None, chunks: Optional[Sequence[Sequence[int]]] = None,
                      versions: Optional[Dict[str, str]] = None, name: Optional[str] = None,
                      description: Optional[str] = None, read: Any = None) -> Dict[str, Any]:
    """The batch document of one THD call on one rank. The values are the ones the call
    received (global offsets under context parallelism, as TE takes them); `chunks`, when the
    caller knows it, lists for each sequence the chunk indices (of 2*cp_size) this rank's rows
    hold."""
    shape_q, shape_k = T.shape(q), T.shape(k)
    if len(shape_q) != 3 or len(shape_k) != 3:
        raise ValueError(f"qkv_format='thd' takes 3-D q, k, v ([t, h, d]); got q {shape_q}, k {shape_k}")
    cu_q, cu_kv = _ints(cu_seqlens_q, read), _ints(cu_seqlens_kv, read)
    varlen: Dict[str, Any] = {"api": API, "cu_seqlens_q": cu_q}
    if cu_kv is not None and cu_kv != cu_q:
        varlen["cu_seqlens_k"] = cu_kv
    if cu_seqlens_q_padded is not None:
        varlen["cu_seqlens_q_padded"] = _ints(cu_seqlens_q_padded, read)
    if cu_seqlens_kv_padded is not None:
        varlen["cu_seqlens_kv_padded"] = _ints(cu_seqlens_kv_padded, read)
    if max_seqlen_q is not None:
        varlen["max_seqlen_q"] = _scalar(max_seqlen_q)
    if max_seqlen_kv is not None:
        varlen["max_seqlen_k"] = _scalar(max_seqlen_kv)
    varlen["total_q"] = shape_q[0]
    varlen["total_k"] = shape_k[0]
    if pad_between_seqs is not None:
        varlen["pad_between_seqs"] = bool(pad_between_seqs)
    if attn_mask_type:
        varlen["attn_mask_type"] = attn_mask_type
    tensors: Dict[str, Any] = {}
    for key, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_kv)):
        if T.is_tensor(t) and T.dtype_name(t) != "int32":
            tensors[key] = {"dtype": T.dtype_name(t)}
    env: Dict[str, Any] = {}
    for lib, version in sorted((versions or {}).items()):
        env[lib] = version
    env["device"] = T.device_name(q)
    dtype = T.dtype_name(q)
    model = {
        "num_heads": shape_q[1],
        "num_kv_heads": shape_k[1],
        "head_dim": shape_q[2],
        "dtype": dtype if dtype in T.MODEL_DTYPES else "fp32",
        "causal": "causal" in (attn_mask_type or ""),
    }
    doc: Dict[str, Any] = {
        "format": "attn-doctor/batch@1",
        "name": name or "te-thd-call",
        "description": description or "Captured: transformer_engine DotProductAttention(qkv_format='thd'), "
                                      f"attn_mask_type={attn_mask_type!r}",
        "environment": env,
        "model": model,
        "varlen": varlen,
    }
    if tensors:
        doc["tensors"] = tensors
    if cp_size > 1:
        cp: Dict[str, Any] = {"size": int(cp_size), "rank": int(cp_rank), "comm_type": cp_comm_type}
        if call is not None:
            cp["call"] = call
        if chunks is not None:
            cp["chunks"] = [[int(c) for c in pair] for pair in chunks]
        doc["context_parallel"] = cp
    return doc


def process_group_facts(cp_group: Any) -> Dict[str, int]:
    """cp_size and cp_rank of a torch.distributed process group: size 1, rank 0 without one.
    A list of groups ("a2a+p2p") multiplies the sizes; TE rejects thd there, so its rank is
    the last group's (recorded, not used by any check)."""
    groups = list(cp_group) if isinstance(cp_group, (list, tuple)) else [cp_group]
    size, rank = 1, 0
    for g in groups:
        if g is None:
            continue
        try:
            import torch.distributed as dist  # torch is loaded: a group was passed
            if dist.is_available() and dist.is_initialized():
                size *= int(dist.get_world_size(g))
                rank = int(dist.get_rank(g))
                continue
        except Exception:
            pass
        n, r = getattr(g, "size", None), getattr(g, "rank", None)
        size *= int(n() if callable(n) else 1)
        rank = int(r() if callable(r) else 0)
    return {"cp_size": size, "cp_rank": rank}


def te_dpa_call(ctx: Any, a: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The capture's and the guard's builder for `DotProductAttention.forward(self, query_layer,
    key_layer, value_layer, ..., qkv_format, cu_seqlens_q, ...)`: the document of a THD call,
    None for any other format (not recorded, not checked)."""
    module = a.get("self")
    qkv_format = a.get("qkv_format") or getattr(module, "qkv_format", None)
    if qkv_format != "thd":
        return None
    q, k = a.get("query_layer"), a.get("key_layer")
    facts = process_group_facts(getattr(module, "cp_group", None))
    mask_type = a.get("attn_mask_type") or getattr(module, "attn_mask_type", None)
    versions = dict(getattr(ctx, "versions", {}) or {})
    doc = thd_call_document(
        q, k, a.get("value_layer"), a.get("cu_seqlens_q"), a.get("cu_seqlens_kv"),
        a.get("cu_seqlens_q_padded"), a.get("cu_seqlens_kv_padded"), a.get("max_seqlen_q"), a.get("max_seqlen_kv"),
        attn_mask_type=mask_type, pad_between_seqs=a.get("pad_between_seqs"), cp_size=facts["cp_size"],
        cp_rank=facts["cp_rank"], cp_comm_type=getattr(module, "cp_comm_type", None) or "p2p",
        call=f"te-dpa-{current_call()}", versions=versions, name=getattr(ctx, "name", "") or None,
        description=getattr(ctx, "description", "") or None, read=ctx.cache.get)
    return doc
