"""The CUDA side of attn_doctor.ops: launches the checked kernels on the current stream and
hands back a reader of the launch's violation record that never waits unless asked to.

Each launch gets a record in device memory (reset by a device-to-device copy of an empty
record, on the stream), and the record is copied asynchronously, on the same stream, into a
slot of a pinned host ring. How the host learns that the copy landed (`READOUT`):
  "event"  a CUDA event recorded after the copy, queried (cudaEventQuery: no wait);
  "poll"   the slot is filled with a sentinel before the copy, and the host reads the slot's
           `thread` field (-2 before the copy, -1 or a thread index after): no event at all.
Under CUDA graph capture the poll form is used and the slot is kept: `ops.check()` reads the
slots of captured launches again after every replay's synchronisation.
"""
import os
import threading
from typing import Any, Callable, Dict, List, Optional

import torch

from . import _native

READOUT = os.environ.get("ATTN_DOCTOR_OPS_READOUT", "poll")  # the faster of the two on an H100 (bench/results/ops-h100-2026-11-27)
_ELEM = {torch.bfloat16: 0, torch.float16: 1}
_RING = 1024

_lock = threading.Lock()
_record_size = _native.record_size()
# AccessRecord: count u64, order u64, min_index i64, first (Access), thread i32, ... The
# offset of `thread` is found in the empty record's bytes (-1 right after `first`).
_empty = bytearray(_native.empty_record())


def _thread_offset() -> int:
    # contract/access_record.hpp: ..., Access first; int32 thread; int32 detail_mode;
    # uint64 target_order: `thread` is 16 bytes from the end, -1 in an empty record
    offset = _record_size - 16
    if int.from_bytes(_empty[offset:offset + 4], "little", signed=True) != -1:
        raise RuntimeError("attn_doctor.ops: the AccessRecord layout is not the one this module reads")
    return offset


_THREAD = _thread_offset()
_SENTINEL = (-2).to_bytes(4, "little", signed=True)


class _Ring:
    """Pinned host slots and the device template of an empty record, per device."""

    def __init__(self, device: torch.device):
        self.device = device
        self.host = torch.empty((_RING, _record_size), dtype=torch.uint8, pin_memory=True)
        self.host_view = self.host.numpy()
        self.free = list(range(_RING))
        self.empty = torch.frombuffer(bytearray(_empty), dtype=torch.uint8).to(device)
        self.kept: List[int] = []  # slots of captured launches (CUDA graphs)

    def take(self) -> int:
        if not self.free:
            raise RuntimeError("attn_doctor.ops: more than %d launches with unread violation records; call "
                               "attn_doctor.ops.check() after a synchronisation" % _RING)
        return self.free.pop()

    def give(self, slot: int) -> None:
        self.free.append(slot)

    def parse(self, slot: int) -> Optional[Dict[str, Any]]:
        return _native.parse_record(self.host[slot].data_ptr())


_rings: Dict[int, _Ring] = {}


def _ring(device: torch.device) -> _Ring:
    index = device.index if device.index is not None else torch.cuda.current_device()
    r = _rings.get(index)
    if r is None:
        r = _rings[index] = _Ring(torch.device("cuda", index))
    return r


def _arg(t: torch.Tensor):
    return (t.data_ptr(), t.shape[0], t.shape[1], t.shape[2], t.stride(0), t.stride(1), t.stride(2))


def _contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_contiguous() else t.contiguous()


def _launch_record(ring: _Ring, stream) -> torch.Tensor:
    rec = torch.empty(_record_size, dtype=torch.uint8, device=ring.device)
    rec.copy_(ring.empty, non_blocking=True)
    return rec


def _coverage(writes: torch.Tensor) -> torch.Tensor:
    """(unwritten, first unwritten, written twice or more, first such) of a launch's per-row
    write counters, computed on the device (no synchronisation): int64 (4,)."""
    n = writes.numel()
    idx = torch.arange(n, device=writes.device)
    zero, many = writes == 0, writes > 1
    big = torch.full_like(idx, n)
    return torch.stack([zero.sum(), torch.where(zero, idx, big).min() if n else idx.sum(), many.sum(),
                        torch.where(many, idx, big).min() if n else idx.sum()])


def _coverage_copy(counters: Dict[str, torch.Tensor]):
    """The coverage summaries copied (asynchronously, before the record on the same stream) into
    pinned host memory; the reader parses them once the record's copy landed."""
    host = {}
    for key, writes in counters.items():
        h = torch.empty(4, dtype=torch.int64, pin_memory=True)
        h.copy_(_coverage(writes), non_blocking=True)
        host[key] = (h, writes.numel())
    return host


def _parse_coverage(host) -> Dict[str, Any]:
    out = {}
    for key, (h, n) in host.items():
        u, fu, o, fo = (int(x) for x in h.tolist())
        out[key] = {"unwritten": u, "first_unwritten": fu if fu < n else -1, "overwritten": o,
                    "first_overwritten": fo if fo < n else -1}
    return out


def _reader(ring: _Ring, rec: torch.Tensor, stream, rows: Dict[str, Any], keep: Any = None,
            coverage: Any = None) -> Callable[[bool], Any]:
    """Copies the record into a pinned slot (asynchronously) and returns reader(block): the
    record as a dict once the copy landed (None for a clean launch), or None without waiting
    when it has not landed and block is False."""
    capturing = torch.cuda.is_current_stream_capturing()
    cov = _coverage_copy(coverage or {})  # before the record's copy: it has landed when the record has
    slot = ring.take()
    mode = "poll" if capturing else READOUT
    if mode == "poll":
        ring.host_view[slot, _THREAD:_THREAD + 4] = bytearray(_SENTINEL)
    ring.host[slot].copy_(rec, non_blocking=True)
    event = None
    if mode == "event":
        event = torch.cuda.Event()
        event.record(stream)
    if capturing:
        ring.kept.append(slot)
    keep = [rec, keep]  # the device record (and seqused_k) live until the copy is read

    def read(block: bool):
        if mode == "event":
            if not event.query():
                if not block:
                    return None
                event.synchronize()
        else:
            if bytes(ring.host_view[slot, _THREAD:_THREAD + 4]) == _SENTINEL:
                if capturing:  # the graph has not been replayed since
                    return {"access": None, **rows}
                if not block:
                    return None
                stream.synchronize()
        access = ring.parse(slot)
        if not capturing:
            ring.give(slot)
        if not capturing:
            keep.clear()
        return {"access": access, **rows, **_parse_coverage(cov)}

    read.captured = capturing
    return read


def _used_ptr(seqused_k) -> int:
    """seqused_k as the kernels read it: int32 on the device (0: none). The converted tensor is
    kept by the caller's reader until the record is read."""
    return 0 if seqused_k is None else seqused_k.data_ptr()


def _used(seqused_k):
    if seqused_k is None:
        return None
    t = seqused_k.reshape(-1)
    return (t if t.dtype == torch.int32 else t.to(torch.int32)).contiguous()


def forward(q, k, v, cu_q, cu_k, max_q, max_k, scale, causal, wl, wr, softcap, out, lse, checked=True,
            seqused_k=None, rows=True):
    ring = _ring(q.device)
    stream = torch.cuda.current_stream(q.device)
    q, k, v = _contiguous(q), _contiguous(k), _contiguous(v)
    used = _used(seqused_k)
    writes = torch.zeros(q.shape[0], dtype=torch.int32, device=q.device) if rows else None
    rec = _launch_record(ring, stream)
    _native.varlen_fwd_cuda(_ELEM[q.dtype], _arg(q), _arg(k), _arg(v), cu_q.data_ptr(), cu_k.data_ptr(),
                            cu_q.numel() - 1, max_q, max_k, scale, softcap, causal, wl, wr, out.data_ptr(),
                            lse.data_ptr(), rec.data_ptr(), stream.cuda_stream, checked, _used_ptr(used),
                            writes.data_ptr() if rows else 0)
    return _reader(ring, rec, stream, {"rows": {}}, keep=(used, writes), coverage={"rows": writes} if rows else None)


def backward(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, scale, causal, wl, wr, softcap, dq, dk, dv,
             checked=True, seqused_k=None, rows=True):
    ring = _ring(q.device)
    stream = torch.cuda.current_stream(q.device)
    q, k, v, dout = _contiguous(q), _contiguous(k), _contiguous(v), _contiguous(dout.to(q.dtype))
    H, Hk, D = q.shape[1], k.shape[1], q.shape[2]
    n_soft, n_acc = _native.varlen_bwd_workspace(q.shape[0], H, D, cu_q.numel() - 1, max_q, max_k)
    softmax_d = torch.empty(max(n_soft, 1), dtype=torch.float32, device=q.device)
    dq_accum = torch.empty(max(n_acc, 1), dtype=torch.float32, device=q.device)
    if H != Hk:
        dk_e = torch.empty((k.shape[0], H, D), dtype=k.dtype, device=k.device)
        dv_e = torch.empty((k.shape[0], H, D), dtype=k.dtype, device=k.device)
        ptrs = (dk_e.data_ptr(), dv_e.data_ptr())
    else:
        ptrs = (0, 0)
    used = _used(seqused_k)
    dq_w = torch.zeros(q.shape[0], dtype=torch.int32, device=q.device) if rows else None
    dkv_w = torch.zeros(k.shape[0], dtype=torch.int32, device=q.device) if rows else None
    rec = _launch_record(ring, stream)
    _native.varlen_bwd_cuda(_ELEM[q.dtype], _arg(q), _arg(k), _arg(v), out.data_ptr(), dout.data_ptr(),
                            lse.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), ptrs[0], ptrs[1],
                            softmax_d.data_ptr(), dq_accum.data_ptr(), cu_q.data_ptr(), cu_k.data_ptr(),
                            cu_q.numel() - 1, max_q, max_k, scale, softcap, causal, wl, wr, rec.data_ptr(),
                            stream.cuda_stream, checked, _used_ptr(used), dq_w.data_ptr() if rows else 0,
                            dkv_w.data_ptr() if rows else 0)
    return _reader(ring, rec, stream, {"dq_rows": {}, "dkv_rows": {}}, keep=(used, dq_w, dkv_w),
                   coverage={"dq_rows": dq_w, "dkv_rows": dkv_w} if rows else None)


def backward_supported(dtype: torch.dtype, head_dim: int) -> bool:
    return dtype in _ELEM and _native.varlen_bwd_supported(_ELEM[dtype], head_dim) == ""

