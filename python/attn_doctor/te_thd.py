"""Transformer Engine's DotProductAttention with qkv_format="thd": the batch document of one call.

`thd_call_document` turns the arguments one rank's `DotProductAttention.forward` received
(docs/spec/transformer-engine-thd.md) into an attn-doctor/batch@1 document: the `varlen` block
with the API `transformer_engine.dot_product_attention`, the padded offsets and
`pad_between_seqs`, and a `context_parallel` block (size, rank, comm_type, call) when the call
ran under context parallelism. The capture's hook (hooks.py, entry kind "te_dpa") calls it; a
ring-attention script that reproduces TE's sharding can call it directly for each rank.

torch is never imported here: tensors are read through their own methods.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

API = "transformer_engine.dot_product_attention"

# DotProductAttention.forward's parameters, in order, as TE 1.13 - 2.12 spell them (the ones a
# THD call's record needs; transformer_engine/pytorch/attention/dot_product_attention/
# dot_product_attention.py, 2.x; attention.py, 1.x).
FORWARD_PARAMETERS = (
    "query_layer", "key_layer", "value_layer", "attention_mask", "qkv_format",
    "cu_seqlens_q", "cu_seqlens_kv", "cu_seqlens_q_padded", "cu_seqlens_kv_padded",
    "max_seqlen_q", "max_seqlen_kv", "attn_mask_type",
)


def _ints(t: Any) -> Optional[List[int]]:
    if t is None:
        return None
    if hasattr(t, "detach"):
        t = t.detach()
        if hasattr(t, "cpu"):
            t = t.cpu()
        return [int(x) for x in t.reshape(-1).tolist()]
    return [int(x) for x in t]


def _dtype_name(t: Any) -> Optional[str]:
    d = getattr(t, "dtype", None)
    if d is None:
        return None
    return {"torch.int32": "int32", "torch.int64": "int64", "torch.bfloat16": "bf16",
            "torch.float16": "fp16", "torch.float32": "fp32"}.get(str(d), str(d).replace("torch.", ""))


def _scalar(x: Any) -> Optional[int]:
    if x is None:
        return None
    if hasattr(x, "item"):
        return int(x.item())
    return int(x)


def thd_call_document(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_kv: Any,
                      cu_seqlens_q_padded: Any = None, cu_seqlens_kv_padded: Any = None,
                      max_seqlen_q: Any = None, max_seqlen_kv: Any = None,
                      attn_mask_type: str = "padding_causal", pad_between_seqs: Optional[bool] = None,
                      cp_size: int = 1, cp_rank: int = 0, cp_comm_type: str = "p2p",
                      call: Optional[str] = None, chunks: Optional[Sequence[Sequence[int]]] = None,
                      versions: Optional[Dict[str, str]] = None, name: Optional[str] = None,
                      description: Optional[str] = None) -> Dict[str, Any]:
    """The batch document of one THD call on one rank. The values are the ones the call
    received (global offsets under context parallelism, as TE takes them); `chunks`, when the
    caller knows it, lists for each sequence the chunk indices (of 2*cp_size) this rank's rows
    hold."""
    shape_q = list(q.shape)
    shape_k = list(k.shape)
    if len(shape_q) != 3 or len(shape_k) != 3:
        raise ValueError(f"qkv_format='thd' takes 3-D q, k, v ([t, h, d]); got q {shape_q}, k {shape_k}")
    varlen: Dict[str, Any] = {"api": API, "cu_seqlens_q": _ints(cu_seqlens_q)}
    if cu_seqlens_kv is not None and _ints(cu_seqlens_kv) != varlen["cu_seqlens_q"]:
        varlen["cu_seqlens_k"] = _ints(cu_seqlens_kv)
    if cu_seqlens_q_padded is not None:
        varlen["cu_seqlens_q_padded"] = _ints(cu_seqlens_q_padded)
    if cu_seqlens_kv_padded is not None:
        varlen["cu_seqlens_kv_padded"] = _ints(cu_seqlens_kv_padded)
    if max_seqlen_q is not None:
        varlen["max_seqlen_q"] = _scalar(max_seqlen_q)
    if max_seqlen_kv is not None:
        varlen["max_seqlen_k"] = _scalar(max_seqlen_kv)
    varlen["total_q"] = int(shape_q[0])
    varlen["total_k"] = int(shape_k[0])
    if pad_between_seqs is not None:
        varlen["pad_between_seqs"] = bool(pad_between_seqs)
    tensors: Dict[str, Any] = {}
    for key, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_kv)):
        dt = _dtype_name(t)
        if dt is not None and dt != "int32":
            tensors[key] = {"dtype": dt}
    env: Dict[str, Any] = {"device": str(getattr(q, "device", "cuda:0"))}
    for lib, version in sorted((versions or {}).items()):
        env[lib] = version
    model = {
        "num_heads": int(shape_q[1]),
        "num_kv_heads": int(shape_k[1]),
        "head_dim": int(shape_q[2]),
        "dtype": _dtype_name(q) or "bf16",
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
    """cp_size and cp_rank of a torch.distributed process group (size 1, rank 0 when there is
    none, or when torch.distributed is not initialised)."""
    if cp_group is None:
        return {"cp_size": 1, "cp_rank": 0}
    if isinstance(cp_group, (list, tuple)):  # "a2a+p2p": [a2a group, p2p group]
        size, rank = 1, 0
        for g in cp_group:
            f = process_group_facts(g)
            rank = rank * f["cp_size"] + f["cp_rank"]
            size *= f["cp_size"]
        return {"cp_size": size, "cp_rank": rank}
    try:
        import torch.distributed as dist  # only when a group was passed: torch is loaded
        if dist.is_available() and dist.is_initialized():
            return {"cp_size": int(dist.get_world_size(cp_group)), "cp_rank": int(dist.get_rank(cp_group))}
    except Exception:
        pass
    size = getattr(cp_group, "size", None)
    rank = getattr(cp_group, "rank", None)
    return {"cp_size": int(size() if callable(size) else 1), "cp_rank": int(rank() if callable(rank) else 0)}
