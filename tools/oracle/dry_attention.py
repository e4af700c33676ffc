"""--dry-cpu only: a plain PyTorch attention standing in for the kernel, to test the harness.

NOT a kernel and never a measurement: records made with it carry `"dry_cpu": true` and
tools/oracle/ingest.py refuses them. Segments are cut from cu_seqlens as given and clipped to
the tensors (so the harness gets through broken batches); semantics otherwise follow FA2
(causal diagonal aligned bottom-right per segment, window around it, GQA by head groups).
"""

import math

import torch


def _one(q, k, v, scale, causal, window):
    """q: (n, H, D), k/v: (m, Hk, D) -> (n, H, D)."""
    n, heads, dim = q.shape
    m, kv_heads = k.shape[0], k.shape[1]
    if n == 0 or m == 0:
        return torch.zeros_like(q)
    g = heads // max(kv_heads, 1)
    qf = q.float().transpose(0, 1)
    kf = k.float().repeat_interleave(g, dim=1).transpose(0, 1)
    vf = v.float().repeat_interleave(g, dim=1).transpose(0, 1)
    s = torch.matmul(qf, kf.transpose(1, 2)) * (scale or 1.0 / math.sqrt(dim))
    row = torch.arange(n).unsqueeze(1) + (m - n)
    col = torch.arange(m).unsqueeze(0)
    allowed = torch.ones(n, m, dtype=torch.bool)
    left, right = window
    if causal:
        right = 0
    if right >= 0:
        allowed &= col <= row + right
    if left >= 0:
        allowed &= col >= row - left
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
    return torch.matmul(p, vf).transpose(0, 1).to(q.dtype)


def attention(q, k, v, cu_q, cu_k, max_q, max_k, scale, causal, window, seqused_k=None):
    if cu_q is None:
        return torch.stack([_one(q[b], k[b], v[b], scale, causal, window) for b in range(q.shape[0])])
    cq = [int(x) for x in cu_q.reshape(-1).tolist()]
    ck = [int(x) for x in cu_k.reshape(-1).tolist()]
    pieces = []
    out = torch.zeros_like(q)
    for i in range(min(len(cq), len(ck)) - 1):
        a, b = max(0, min(cq[i], q.shape[0])), max(0, min(cq[i + 1], q.shape[0]))
        c, d = max(0, min(ck[i], k.shape[0])), max(0, min(ck[i + 1], k.shape[0]))
        if seqused_k is not None:
            d = min(d, c + int(seqused_k[i]))
        if b > a:
            pieces.append((a, b, _one(q[a:b], k[c:d], v[c:d], scale, causal, window)))
    if not pieces:
        return out + 0 * q  # keep the graph so the backward runs
    rows = torch.cat([torch.arange(a, b) for a, b, _ in pieces])
    values = torch.cat([o for _, _, o in pieces])
    return out.index_put((rows,), values)
