"""The oracle's reference: what the user meant, computed in fp32 on the same inputs.

Intended sequences come from the batch's `intent` when it has one; otherwise they are derived
as docs/spec/batch-format.md#intent defines it (mask runs split at position-id restarts,
position-id runs, `cu_seqlens_q` segments), or, for a batch with none of those, one sequence per
row. Every record names the source it used (`reference.intent`).

A reference sequence is a set of query rows and key rows of the tensors the user passed,
each with its slot (position in its row), so one rule serves the packed and the padded
frames: key s is attended by query t when both belong to the sequence, s <= t when causal, and
the window (left, right) around t allows it. The forward and the backward (softmax, its
gradient, the logit softcap's tanh and GQA head groups) are written out per sequence and head
chunk, in fp32, so memory stays bounded on the largest cases.
"""

import math

import torch


# ---------------------------------------------------------------------------------------
# intent

def derive_intent(doc, case):
    """-> (sequences [(row, start, length)], source). `case` is tools/parity/batchfile.load()'s."""
    given = doc.get("intent", {}).get("sequences")
    if given:
        return [(s.get("row", 0), s["start"], s["length"]) for s in given], "given"
    mask = case.get("mask2d")
    origin = doc["model"].get("position_origin", 0)
    pos = case.get("position_ids")
    if pos is not None and pos.dim() == 3:
        pos = pos[0]
    if pos is not None and pos.dim() == 1:
        pos = pos.unsqueeze(0)
    if mask is not None:
        seqs = []
        for b in range(mask.shape[0]):
            row = mask[b].tolist()
            ids = pos[b if pos.shape[0] > 1 else 0].tolist() if pos is not None and pos.shape[-1] == mask.shape[1] else None
            start = None
            for i, value in enumerate(row + [0]):
                boundary = start is not None and (value != row[start] or (ids is not None and i < len(row) and
                                                                              (ids[i] == origin or ids[i] != ids[i - 1] + 1)))
                if start is not None and (value == 0 or boundary):
                    seqs.append((b, start, i - start))
                    start = None
                if start is None and value != 0 and i < len(row):
                    start = i
        return seqs, "mask"
    if pos is not None:
        seqs = []
        lk, lq = case["kv_length"], case["query_length"]
        width = pos.shape[-1]
        shift = max(lk - width, 0)
        for b in range(pos.shape[0]):
            ids = pos[b].tolist()
            start = 0
            for i in range(1, width + 1):
                if i == width or ids[i] == origin or ids[i] != ids[i - 1] + 1:
                    first = start + shift
                    begun = max(first - (ids[start] - origin), 0) if shift else first
                    seqs.append((b, begun, i + shift - begun))
                    start = i
        return seqs, "position_ids"
    return None, None


def segments_from_cu(cu_values, total):
    """The index of the cu_seqlens segment behind each sequence intent_from_cu returns."""
    return [i for i, (a, b) in enumerate(zip(cu_values, cu_values[1:])) if min(b, total) > max(a, 0)]


def intent_from_cu(cu_values, total):
    """Explicit varlen without `intent`: each 1-D cu_seqlens_q segment of positive length and
    non-negative start, clipped to the rows that exist."""
    seqs = []
    for a, b in zip(cu_values, cu_values[1:]):
        a, b = max(a, 0), min(b, total)
        if b > a:
            seqs.append((0, a, b - a))
    return seqs


# ---------------------------------------------------------------------------------------
# reference sequences: rows of the user's tensors and their slots

class RefSeq:
    def __init__(self, q_rows, q_slots, k_rows, k_slots, out_rows=None):
        self.q_rows, self.q_slots = q_rows, q_slots
        self.k_rows, self.k_slots = k_rows, k_slots
        self.out_rows = q_rows if out_rows is None else out_rows


def padded_sequences(seqs, batch, lq, lk):
    """Padded frame: k (B, Lk, ...) rows b*Lk + s. The queries of a sequence are its last Lq
    tokens, placed in q (B, Lq, ...) the way the mask places the row's tokens: a row that ends
    at the last key slot (left padding, or none) has them right-aligned, q row b*Lq + j at key
    slot Lk - Lq + j; a right-padded row (its tokens from slot 0, ending before Lk) has them
    left-aligned, q row b*Lq + j at key slot end - n + j for n = min(Lq, length) queries."""
    out = []
    for b, start, length in seqs:
        lo, hi = start, start + length
        k_lo, k_hi = max(lo, 0), min(hi, lk)
        if k_hi <= k_lo or b >= batch:
            continue
        k_slots = torch.arange(k_lo, k_hi)
        if lq < lk and lo == 0 and hi < lk:  # right padding with a partial query
            n = min(lq, k_hi - k_lo)
            q_slots = torch.arange(k_hi - n, k_hi)
            q_rows = b * lq + torch.arange(n)
        else:
            q_lo, q_hi = max(lo, lk - lq), min(hi, lk)
            if q_hi <= q_lo:
                continue
            q_slots = torch.arange(q_lo, q_hi)
            q_rows = b * lq + (q_slots - (lk - lq))
        out.append(RefSeq(q_rows, q_slots, b * lk + k_slots, k_slots))
    return out


def packed_sequences(seqs, cu_k_values, total_q, total_k, same_k, seqused_k=None, k_segments=None):
    """Explicit varlen: intended sequence i holds q rows [start, start + length); its keys are the
    same rows when cu_seqlens_k is cu_seqlens_q, else segment i of cu_seqlens_k (clipped, limited
    by seqused_k), aligned so the last query meets the last key (FA2's bottom-right diagonal).
    `k_segments`: the cu_seqlens_k segment of each intended sequence where it is not the i-th
    (sequences read from a cu_seqlens_q with empty segments, which intent_from_cu skips)."""
    out = []
    for i, (_, start, length) in enumerate(seqs):
        q_rows = torch.arange(start, min(start + length, total_q))
        if len(q_rows) == 0:
            continue
        if same_k:
            k_rows = torch.arange(start, min(start + length, total_k))
        else:
            j = k_segments[i] if k_segments is not None else i
            if j + 1 >= len(cu_k_values):
                continue
            a, b = max(cu_k_values[j], 0), min(cu_k_values[j + 1], total_k)
            if seqused_k is not None and j < len(seqused_k):
                b = min(b, a + seqused_k[j])
            k_rows = torch.arange(a, max(a, b))
        if len(k_rows) == 0:
            continue
        n, m = len(q_rows), len(k_rows)
        out.append(RefSeq(q_rows, torch.arange(n) + (m - n), k_rows, torch.arange(m)))
    return out


# ---------------------------------------------------------------------------------------
# rotary (the reference's own, GPT-NeoX or GPT-J pairs)

def rotary_tables(dim_meant, rotary_dim, base, positions, device):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim_meant, 2, device=device, dtype=torch.float64) / dim_meant))
    freqs = torch.outer(positions.to(device, torch.float64), inv_freq[: rotary_dim // 2])
    return freqs.cos().float(), freqs.sin().float()


def rotate(x, cos, sin, interleaved, inverse=False):
    """x: (n, H, D) fp32; rotates the first 2 * cos.shape[1] columns by the (n, r/2) angles."""
    r = 2 * cos.shape[1]
    if inverse:
        sin = -sin
    c, s = cos[:, None, :], sin[:, None, :]
    y = x.clone()
    if interleaved:
        x1, x2 = x[..., 0:r:2], x[..., 1:r:2]
        y[..., 0:r:2] = x1 * c - x2 * s
        y[..., 1:r:2] = x2 * c + x1 * s
    else:
        x1, x2 = x[..., : r // 2], x[..., r // 2: r]
        y[..., : r // 2] = x1 * c - x2 * s
        y[..., r // 2: r] = x2 * c + x1 * s
    return y


# ---------------------------------------------------------------------------------------
# attention, forward and backward, one sequence

def sequence_reference(q, k, v, do, q_slots, k_slots, causal, window, softcap, scale, want_grads,
                       head_chunk=4):
    """q/do: (n, H, D), k/v: (m, Hk, D), fp32 -> out (n, H, D) and, when wanted, dq, dk, dv."""
    n, heads, dim = q.shape
    m, kv_heads = k.shape[0], k.shape[1]
    group = heads // kv_heads
    t = q_slots.to(q.device)[:, None]
    s = k_slots.to(q.device)[None, :]
    allowed = torch.ones(n, m, dtype=torch.bool, device=q.device)
    left, right = window
    if causal:
        allowed &= s <= t
        right = 0 if right < 0 else right
    if left >= 0:
        allowed &= s >= t - left
    if right >= 0:
        allowed &= s <= t + right
    # heads per chunk: keep each (h, n, m) fp32 score tensor near 1.5 GB on the longest sequences
    head_chunk = max(1, min(head_chunk, int(1.5e9 // max(n * m * 4, 1))))
    out = torch.zeros_like(q)
    dq = torch.zeros_like(q) if want_grads else None
    dk = torch.zeros_like(k) if want_grads else None
    dv = torch.zeros_like(v) if want_grads else None
    for h0 in range(0, heads, head_chunk):
        h1 = min(h0 + head_chunk, heads)
        kv_index = torch.arange(h0, h1, device=q.device) // group
        qh = q[:, h0:h1].transpose(0, 1)                 # (h, n, D)
        kh = k[:, kv_index].transpose(0, 1)              # (h, m, D)
        vh = v[:, kv_index].transpose(0, 1)
        scores = torch.matmul(qh, kh.transpose(1, 2)) * scale
        if softcap:
            tanh = torch.tanh(scores / softcap)
            scores = softcap * tanh
        p = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
        oh = torch.matmul(p, vh)                         # (h, n, D)
        out[:, h0:h1] = oh.transpose(0, 1)
        if want_grads:
            doh = do[:, h0:h1].transpose(0, 1)
            dvh = torch.matmul(p.transpose(1, 2), doh)   # (h, m, D)
            dp = torch.matmul(doh, vh.transpose(1, 2))
            ds = p * (dp - (doh * oh).sum(-1, keepdim=True))
            if softcap:
                ds = ds * (1 - tanh * tanh)
            dqh = torch.matmul(ds, kh) * scale
            dkh = torch.matmul(ds.transpose(1, 2), qh) * scale
            dq[:, h0:h1] = dqh.transpose(0, 1)
            dk.index_add_(1, kv_index, dkh.transpose(0, 1))
            dv.index_add_(1, kv_index, dvh.transpose(0, 1))
    return out, dq, dk, dv


# ---------------------------------------------------------------------------------------
# comparison

TOLERANCE = {torch.bfloat16: (3e-2, 3e-2), torch.float16: (5e-3, 5e-3), torch.float32: (1e-4, 1e-4)}


def wrong_rows(actual, expected, rows, dtype, relative_to_max=False, scale_floor=0.0):
    """Rows (indices into the flattened first axis) whose values differ beyond the dtype's
    tolerance or are not finite. actual/expected: (R, ...) restricted to `rows`. With
    relative_to_max the absolute tolerance scales with the largest expected value, or with
    `scale_floor` when that is larger (the gradients share one scale: a dq that is exactly 0,
    as for segments of one token, is judged against the size of dk and dv, not against 0)."""
    atol, rtol = TOLERANCE.get(dtype, (3e-2, 3e-2))
    a = actual.float().reshape(len(rows), -1)
    e = expected.float().reshape(len(rows), -1)
    scale = 1.0
    if relative_to_max:
        scale = max(float(e.abs().max()) if e.numel() else 0.0, scale_floor, 1e-6)
        atol = 2 * atol
    finite = torch.isfinite(a).all(dim=1)
    err = (a - e).abs()
    bad_elem = err > (atol * scale + rtol * e.abs())
    bad = (~finite) | bad_elem.any(dim=1)
    worst = float(torch.nan_to_num(err, nan=float("inf")).max()) if err.numel() else 0.0
    nan_rows = rows[~finite.cpu()] if (~finite).any() else rows[:0]
    return rows[bad.cpu()], worst, nan_rows


def ranges(rows):
    """Sorted row indices -> inclusive [first, last] ranges."""
    values = sorted(set(int(r) for r in rows))
    out = []
    for r in values:
        if out and r == out[-1][1] + 1:
            out[-1][1] = r
        else:
            out.append([r, r])
    return out


def scale_for(head_dim, softmax_scale=None):
    return softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
