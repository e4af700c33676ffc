"""Materialise an attn-doctor batch file (docs/spec/batch-format.md) as torch inputs.

Only what the parity drivers need: the `model` geometry and the `batch` block (mask, position
ids, lengths, flash kwargs). The conventions match the C++ loader's (lib/batch/loader.cpp): a
dense 2-D mask keeps its values (0/1, booleans, segment ids) as int64 or bool; a 4-D mask is
built from its 2-D mask like transformers' `_prepare_4d_causal_attention_mask` (see `_mask_4d`);
defaults for B, Lq and Lk follow the loader's.
"""

import json
from pathlib import Path

import torch

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def _mask_2d(obj):
    if "values" in obj:
        values = obj["values"]
        flat = [x for row in values for x in row] if values and isinstance(values[0], list) else values
        if flat and all(isinstance(x, bool) for x in flat):
            return torch.tensor(values, dtype=torch.bool)
        return torch.tensor(values, dtype=torch.int64)
    if "lengths" in obj:
        width, side = obj["width"], obj.get("padding_side", "right")
        rows = []
        for n in obj["lengths"]:
            row = [1] * n + [0] * (width - n) if side == "right" else [0] * (width - n) + [1] * n
            rows.append(row)
        return torch.tensor(rows, dtype=torch.int64)
    raise ValueError(f"unsupported mask encoding: {sorted(obj)}")


def _mask_4d(obj, model_dtype):
    """(B, H1, Q, K) from a 2-D mask of width W <= K, as lib/batch/loader.cpp builds it: query q
    sits at absolute position W - Q + q; key k is attended when k < W, the 2-D mask has it and
    (if causal) k <= that position. Additive masks are bf16 like the loader's."""
    base = _mask_2d(obj["from"]).bool()
    b, h1, q, k = obj["shape"]
    w = base.shape[1]
    padded = torch.zeros(b, k, dtype=torch.bool)
    padded[:, :w] = base
    attended = padded[:, None, None, :].expand(b, h1, q, k).clone()
    if obj.get("causal", True):
        row = torch.arange(q).unsqueeze(1) + (w - q)
        col = torch.arange(k).unsqueeze(0)
        attended &= (col <= row)[None, None]
    if obj.get("style", "additive") == "boolean":
        return attended
    additive = torch.zeros(b, h1, q, k, dtype=torch.bfloat16)
    return additive.masked_fill(~attended, torch.finfo(torch.bfloat16).min)


def _position_ids(obj, mask, batch_size, width, origin):
    if "values" in obj:
        ids = torch.tensor(obj["values"], dtype=torch.int64)
    elif obj.get("from") == "mask":
        ids = mask.long().cumsum(-1) - 1
        ids = ids.masked_fill(mask == 0, 1)
    elif obj.get("from") == "packed":
        row = [origin + i for n in obj["lengths"] for i in range(n)]
        ids = torch.tensor([row], dtype=torch.int64)
    elif obj.get("from") == "arange":
        ids = torch.arange(width, dtype=torch.int64).unsqueeze(0).expand(batch_size, width).clone()
    else:
        raise ValueError(f"unsupported position ids encoding: {sorted(obj)}")
    if obj.get("mrope"):
        ids = ids.reshape(-1, ids.shape[-1]).unsqueeze(0).expand(3, -1, -1).clone()
    return ids


def load(path):
    path = Path(path)
    doc = json.loads(path.read_text())
    model = doc["model"]
    block = doc.get("batch", {})
    dtype = DTYPES[model.get("dtype", "bf16")]
    mask = None
    if "attention_mask" in block:
        m = block["attention_mask"]
        mask = _mask_4d(m, dtype) if "shape" in m else _mask_2d(m)
    mask2d = mask if mask is not None and mask.dim() == 2 else None
    pos = None
    width = None
    if mask is not None:
        width = mask.shape[-1]
    batch_size = block.get("batch_size")
    if batch_size is None and mask is not None:
        batch_size = mask.shape[0]
    if "position_ids" in block:
        p = block["position_ids"]
        if "file" in p:  # a .npy sidecar beside the batch file: its values, as if given inline
            import numpy
            values = numpy.load(path.parent / p["file"], allow_pickle=False).astype("int64").tolist()
            p = {**{k: v for k, v in p.items() if k != "file"}, "values": values}
        if "values" in p:
            pos = torch.tensor(p["values"], dtype=torch.int64)
            if batch_size is None:
                batch_size = 1 if pos.dim() == 1 else pos.shape[-2]
            width = width if width is not None else pos.shape[-1]
        else:
            if width is None and p.get("from") == "packed":
                width = sum(p["lengths"])
            if width is None:
                width = block.get("kv_length")
            batch_size = batch_size or 1
        if pos is None:
            pos = _position_ids(p, mask2d, batch_size, width, model.get("position_origin", 0))
        elif p.get("mrope"):
            pos = _position_ids(p, mask2d, batch_size, width, model.get("position_origin", 0))
    # the loader's defaults (lib/batch/loader.cpp): Lk from kv_length, else the mask's width,
    # else the position ids' width; Lq from query_length, else 1 for decode, else the position
    # ids' width when there is no mask, else Lk
    pos_width = pos.shape[-1] if pos is not None else None
    kv_length = block.get("kv_length", width)
    stage = block.get("stage")
    query_length = block.get("query_length")
    if query_length is None:
        if stage == "decode":
            query_length = 1
        elif pos_width is not None and mask is None:
            query_length = pos_width
        else:
            query_length = kv_length
    if kv_length is None:
        kv_length = query_length
    batch_size = batch_size or 1
    return {
        "doc": doc,
        "name": path.name,
        "model": model,
        "dtype": dtype,
        "attention_mask": mask,
        "position_ids": pos,
        "batch_size": batch_size,
        "query_length": query_length,
        "kv_length": kv_length,
        "flash_kwargs": block.get("flash_kwargs") or {},
        "flash_attn": doc.get("environment", {}).get("flash_attn", "2.6.3"),
    }


def make_qkv(case, seed=0):
    """q: (B, Lq, H, D), k/v: (B, Lk, Hk, D), seeded random values in the model dtype."""
    m = case["model"]
    heads, kv_heads, dim = m["num_heads"], m.get("num_kv_heads", m["num_heads"]), m["head_dim"]
    g = torch.Generator().manual_seed(seed)
    b, lq, lk = case["batch_size"], case["query_length"], case["kv_length"]
    q = torch.randn(b, lq, heads, dim, generator=g).to(case["dtype"])
    k = torch.randn(b, lk, kv_heads, dim, generator=g).to(case["dtype"])
    v = torch.randn(b, lk, kv_heads, dim, generator=g).to(case["dtype"])
    return q, k, v
