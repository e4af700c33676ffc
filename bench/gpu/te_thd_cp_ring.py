"""A context-parallel THD attention step on two GPUs, healthy and broken, measured.

Transformer Engine cannot be carried to the accelerator machine (its binary wheel is far over
the per-call transfer limit), so this reproduces the contract of TE's THD context parallelism
(docs/spec/transformer-engine-thd.md) with torch.distributed over NCCL and a ring-attention
forward over PyTorch's bundled FlashAttention-2 (aten::_flash_attention_forward, varlen form,
returning the log-sum-exp):

- the caller passes TE's arguments: the global cu_seqlens (actual lengths), the global
  cu_seqlens_padded, the global max_seqlen; the entry divides the padded offsets by CP as TE's
  AttnFuncWithCPAndKVP2P.forward does (TE 2.12, context_parallel.py);
- each sequence is split into 2*CP chunks; rank r holds chunks r and 2*CP-1-r (the
  load-balanced sharding of TE's docstring and Megatron's get_batch_on_this_cp_rank);
- the ring's steps are TE's p2p sections: the diagonal (causal, own KV), the lower triangle
  (all local queries against the first half of an earlier rank's KV) and the upper triangle
  (the second half of the local queries against all of a later rank's KV), merged by the
  log-sum-exp.

Each case runs in its own torchrun process pair. Every rank writes the batch document of the
call it made (attn_doctor.te_thd.thd_call_document, the capture's own builder) and its
outcome; rank 0 compares the gathered output with a single-GPU FA2 varlen reference on the
unpadded sequences.

    python3 bench/gpu/te_thd_cp_ring.py --out DIR            # every case, one process pair each
    torchrun --nproc_per_node=2 bench/gpu/te_thd_cp_ring.py --case healthy --out DIR
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback

CASES = {
    "healthy": "every sequence padded to a multiple of 2*CP; cu_seqlens_padded passed; load-balanced chunks",
    "not-padded": "sequences not padded to a multiple of 2*CP: cu_seqlens_padded = cu_seqlens (odd lengths)",
    "local-offsets": "the rank-local padded offsets (already divided by CP) passed as cu_seqlens_padded, so "
                     "the entry divides them again",
    "wrong-chunk": "rank r holds chunks 2r and 2r+1 (a contiguous split), the ring assumes r and 2CP-1-r",
}
LENGTHS = [1000, 517, 2047, 35, 301]
HEADS, HEAD_DIM = 8, 128


def padded_lengths(lengths, multiple):
    return [(n + multiple - 1) // multiple * multiple for n in lengths]


def cumulative(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def main_case(case: str, out_dir: str) -> int:
    import torch
    import torch.distributed as dist
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from attn_doctor.te_thd import thd_call_document

    dist.init_process_group("nccl")
    rank, cp = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    record = {"case": case, "rank": rank, "cp_size": cp, "what": CASES[case]}

    # the global batch, identical on both ranks (one seed)
    g = torch.Generator().manual_seed(1234)
    total = sum(LENGTHS)
    q_all = torch.randn(total, HEADS, HEAD_DIM, generator=g).to(torch.bfloat16)
    k_all = torch.randn(total, HEADS, HEAD_DIM, generator=g).to(torch.bfloat16)
    v_all = torch.randn(total, HEADS, HEAD_DIM, generator=g).to(torch.bfloat16)
    cu = cumulative(LENGTHS)

    # what the caller passes (TE's arguments: global offsets)
    if case == "not-padded":
        padded = list(LENGTHS)
    else:
        padded = padded_lengths(LENGTHS, 2 * cp)
    cu_pad = cumulative(padded)
    max_seqlen = max(padded)
    passed_cu_pad = [c // cp for c in cu_pad] if case == "local-offsets" else cu_pad

    idx, chunks = local_index(case, rank, cp, cu, padded, cu_pad)
    index = torch.tensor(idx, dtype=torch.long)
    real = index >= 0

    def take(x):
        t = torch.zeros(len(idx), HEADS, HEAD_DIM, dtype=x.dtype)
        t[real] = x[index[real]]
        return t.to(dev)

    q, k, v = take(q_all), take(k_all), take(v_all)
    cu_t = torch.tensor(cu, dtype=torch.int32, device=dev)
    cu_pad_t = torch.tensor(passed_cu_pad, dtype=torch.int32, device=dev)

    # the capture: the call this rank made, as the hook writes it
    doc = thd_call_document(q, k, v, cu_t, cu_t, cu_pad_t, cu_pad_t, max_seqlen, max_seqlen,
                            attn_mask_type="padding_causal", pad_between_seqs=None, cp_size=cp, cp_rank=rank,
                            cp_comm_type="p2p", call=f"te-thd-cp-{case}-step-0", chunks=chunks,
                            versions={"torch": torch.__version__.split("+")[0]},
                            name=f"te-thd-cp2-{case}-rank{rank}",
                            description=f"Measured on two GPUs (bench/gpu/te_thd_cp_ring.py, case {case}): "
                                        f"{CASES[case]}. Rank {rank} of {cp}.")
    with open(os.path.join(out_dir, f"{case}-rank{rank}.json"), "w") as fh:
        json.dump(doc, fh, indent=1)

    t0 = time.time()
    try:
        out = ring_forward(q, k, v, cu_pad_t, max_seqlen, rank, cp, dev)
        torch.cuda.synchronize()
        record["error"] = None
    except Exception as e:  # noqa: BLE001 - recorded
        record["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        record["traceback_tail"] = traceback.format_exc().splitlines()[-3:]
        out = None
    record["seconds"] = round(time.time() - t0, 4)

    # gather the outputs and positions on rank 0, compare with the single-GPU reference
    ok = torch.tensor([0 if out is None else 1], device=dev)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if ok.item() == 1:
        n_local = torch.tensor([out.shape[0]], device=dev)
        sizes = [torch.zeros_like(n_local) for _ in range(cp)]
        dist.all_gather(sizes, n_local)
        m = max(int(s.item()) for s in sizes)
        pad_out = torch.zeros(m, HEADS, HEAD_DIM, dtype=out.dtype, device=dev)
        pad_out[:out.shape[0]] = out
        pad_idx = torch.full((m,), -1, dtype=torch.long, device=dev)
        pad_idx[:len(idx)] = index.to(dev)
        outs = [torch.zeros_like(pad_out) for _ in range(cp)]
        idxs = [torch.zeros_like(pad_idx) for _ in range(cp)]
        dist.all_gather(outs, pad_out)
        dist.all_gather(idxs, pad_idx)
        if rank == 0:
            ref = reference(q_all.to(dev), k_all.to(dev), v_all.to(dev), cu, dev)
            got = torch.full_like(ref, float("nan"))
            for o, ix in zip(outs, idxs):
                sel = ix >= 0
                got[ix[sel]] = o[sel]
            missing = torch.isnan(got.float()).any(dim=(1, 2))
            err = (got.float() - ref.float()).abs().nan_to_num(nan=0.0).amax(dim=(1, 2))
            wrong = (err > 0.05) | missing
            record["tokens"] = total
            record["tokens_missing"] = int(missing.sum().item())
            record["tokens_wrong"] = int(wrong.sum().item())
            record["max_abs_error"] = float(err.max().item())
            bad = [i for i in range(len(LENGTHS)) if wrong[cu[i]:cu[i + 1]].any().item()]
            record["sequences_wrong"] = bad
            record["outcome"] = "ok" if record["tokens_wrong"] == 0 else "wrong_output"
    else:
        record["outcome"] = "error"
    with open(os.path.join(out_dir, f"{case}-rank{rank}.outcome.json"), "w") as fh:
        json.dump(record, fh, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def local_index(case, r, cp, cu, padded, cu_pad):
    """The sharder (what the data loader does once per batch): rank r's rows as global token
    indices of the unpadded batch (-1: a padding row), and the chunks it holds per sequence.
    Each sequence's local length is cu_pad // cp's difference; its first half comes from
    chunk a, its second from chunk b (chunks of padded // (2 * cp) tokens)."""
    a, b = (2 * r, 2 * r + 1) if case == "wrong-chunk" and r == 1 else (r, 2 * cp - 1 - r)
    idx, chunks = [], []
    for i, (start, p) in enumerate(zip(cu, padded)):
        n = LENGTHS[i]
        local_n = cu_pad[i + 1] // cp - cu_pad[i] // cp
        half = local_n // 2
        c = p // (2 * cp)
        chunks.append([a, b])
        for j in range(half):
            pos = a * c + j
            idx.append(start + pos if pos < n else -1)
        for j in range(local_n - half):
            pos = b * c + j
            idx.append(start + pos if pos < n else -1)
    return idx, chunks


def fa(q, k, v, cu_q, cu_k, max_q, max_k, causal):
    import torch
    o, lse, *_ = torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, max_q, max_k, 0.0, causal, False)
    if lse.dim() == 2 and lse.shape[0] == q.shape[1] and lse.shape[1] == q.shape[0]:
        return o, lse  # (H, T): the unpadded layout
    if lse.dim() == 3 and lse.shape[1] == q.shape[1]:  # (B, H, max_q): the padded layout
        cu = cu_q.tolist()
        parts = [lse[b, :, : cu[b + 1] - cu[b]] for b in range(len(cu) - 1)]
        flat = torch.cat(parts, dim=1)
        full = torch.full((q.shape[1], q.shape[0]), float("-inf"), device=q.device)
        full[:, : flat.shape[1]] = flat
        return o, full
    raise RuntimeError(f"unexpected log-sum-exp layout {tuple(lse.shape)} for q {tuple(q.shape)}")


def half_index(cu_local, first: bool, dev):
    """Rows of each sequence's first (second) half in a rank's local layout, and their cu."""
    import torch
    rows, lens = [], []
    for s, e in zip(cu_local[:-1], cu_local[1:]):
        h = (e - s) // 2
        a, b = (s, s + h) if first else (s + h, e)
        rows.extend(range(a, b))
        lens.append(b - a)
    return torch.tensor(rows, dtype=torch.long, device=dev), torch.tensor(cumulative(lens), dtype=torch.int32, device=dev), max(lens)


def p2p_exchange(kv, rank, cp):
    """Send this rank's KV to the next rank, receive the previous rank's."""
    import torch
    import torch.distributed as dist
    recv = torch.empty_like(kv)
    ops = [dist.P2POp(dist.isend, kv, (rank + 1) % cp), dist.P2POp(dist.irecv, recv, (rank - 1) % cp)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return recv


def ring_forward(q, k, v, cu_pad_passed, max_seqlen, rank, cp, dev, exchange=p2p_exchange, attention=None):
    """TE's p2p sections over FA2 varlen: cu_seqlens_padded // cp is each rank's layout."""
    import torch
    fa_ = attention or fa
    cu_local = [int(x) // cp for x in cu_pad_passed.tolist()]
    cu_local_t = torch.tensor(cu_local, dtype=torch.int32, device=dev)
    max_local = max_seqlen // cp
    first_rows, cu_first, max_first = half_index(cu_local, True, dev)
    second_rows, cu_second, max_second = half_index(cu_local, False, dev)
    T = q.shape[0]
    out = torch.zeros(T, q.shape[1], q.shape[2], dtype=torch.float32, device=dev)
    lse = torch.full((q.shape[1], T), float("-inf"), dtype=torch.float32, device=dev)

    def merge(rows, o, l):
        # rows: local query rows of this partial result
        old_l = lse[:, rows]
        new_l = torch.logaddexp(old_l, l)
        w_old = torch.exp(old_l - new_l).transpose(0, 1).unsqueeze(-1)
        w_new = torch.exp(l - new_l).transpose(0, 1).unsqueeze(-1)
        out[rows] = out[rows] * w_old + o.float() * w_new
        lse[:, rows] = new_l

    kv = torch.stack([k, v])
    all_rows = torch.arange(T, device=dev)
    for step in range(cp):
        src = (rank - step) % cp
        if step > 0:
            kv = exchange(kv, rank, cp)
        kk, vv = kv[0], kv[1]
        if src == rank:  # diagonal: causal within the local layout
            o, l = fa_(q, kk, vv, cu_local_t, cu_local_t, max_local, max_local, True)
            merge(all_rows, o, l)
        elif src < rank:  # lower triangle: every local query, the first half of the earlier rank's KV
            o, l = fa_(q, kk[first_rows], vv[first_rows], cu_local_t, cu_first, max_local, max_first, False)
            merge(all_rows, o, l)
        else:  # upper triangle: the second half of the local queries, all of the later rank's KV
            o, l = fa_(q[second_rows], kk, vv, cu_second, cu_local_t, max_second, max_local, False)
            merge(second_rows, o, l)
    return out.to(q.dtype)


def reference(q, k, v, cu, dev):
    import torch
    cu_t = torch.tensor(cu, dtype=torch.int32, device=dev)
    m = max(b - a for a, b in zip(cu[:-1], cu[1:]))
    o, _ = fa(q, k, v, cu_t, cu_t, m, m, True)
    return o


def driver(out_dir: str, timeout: int) -> int:
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1",
               PYTHONUNBUFFERED="1")
    summary = []
    for case in CASES:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               os.path.abspath(__file__), "--case", case, "--out", out_dir]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
            rc, tail = p.returncode, (p.stdout + p.stderr)[-1500:]
        except subprocess.TimeoutExpired as e:
            rc, tail = "timeout", str(e)[-500:]
        row = {"case": case, "rc": rc, "wall_seconds": round(time.time() - t0, 2)}
        for r in range(2):
            path = os.path.join(out_dir, f"{case}-rank{r}.outcome.json")
            if os.path.exists(path):
                with open(path) as fh:
                    row[f"rank{r}"] = json.load(fh)
        if rc != 0:
            row["log_tail"] = tail
        summary.append(row)
        print(json.dumps(row), flush=True)
    with open(os.path.join(out_dir, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=sorted(CASES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=int, default=150)
    a = ap.parse_args()
    sys.exit(main_case(a.case, a.out) if a.case else driver(a.out, a.timeout))
