"""The CUDA side of attn_doctor.ops: allocates what a checked launch writes (torch's caching
allocator, on the caller's stream) and hands the launch to the extension, which runs it and its
readout on the current stream and keeps it in its queue until the host reads it.

In the extension (python/native.cpp, python/ops_readout.cu), per launch: a slot of a pinned,
mapped host ring and the slot's device AccessRecord; the row counters zeroed; the checked
launch(es); then one small readout kernel on the same stream that folds the row counters into
four numbers per counter set, copies the record into the host slot and sets the slot's state
last (a system-scope fence before it). How the host learns that the readout landed (`READOUT`):
  "poll"   the slot's state, read by the host: no event, no synchronisation (the default);
  "event"  a CUDA event recorded after the readout, queried (cudaEventQuery: no wait).
Under CUDA graph capture the poll form is used and the slot is kept: `ops.check()` reads the
slots of captured launches again after every replay's synchronisation.
"""
import os

import torch

from . import _native

READOUT = os.environ.get("ATTN_DOCTOR_OPS_READOUT", "poll")  # the faster of the two on an H100 (bench/results/ops-h100-2026-11-27)
_ELEM = {torch.bfloat16: 0, torch.float16: 1}


def set_readout(mode: str) -> None:
    """"poll" or "event" (module docstring), for the launches made from now on."""
    global READOUT
    _native.ops_set_readout(mode)
    READOUT = mode


set_readout(READOUT)

try:
    _raw_stream = torch._C._cuda_getCurrentRawStream  # the current stream's handle, without a Stream object
except AttributeError:  # pragma: no cover - older torch
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream


def _arg(t: torch.Tensor):
    return (t.data_ptr(), *t.shape, *t.stride())


def _contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_contiguous() else t.contiguous()


def _used(seqused_k):
    """seqused_k as the kernels read it: int32 on the device, contiguous (None: none)."""
    if seqused_k is None:
        return None
    t = seqused_k.reshape(-1)
    return (t if t.dtype == torch.int32 else t.to(torch.int32)).contiguous()


# The temporaries below (the converted seqused_k, the row counters, the workspaces) are freed
# when these functions return: torch's caching allocator hands their memory out again only to
# work that runs after the launch and its readout on the same stream.

def forward(q, k, v, cu_q, cu_k, max_q, max_k, scale, causal, wl, wr, softcap, out, lse, payload, seqused_k=None,
            rows=True):
    """Launches the checked forward writing out / lse; `payload` comes back from
    _native.ops_drain if the launch was broken."""
    device = q.get_device()
    q, k, v = _contiguous(q), _contiguous(k), _contiguous(v)
    used = _used(seqused_k)
    counters = torch.empty(q.shape[0], dtype=torch.int32, device=q.device) if rows else None
    _native.ops_fwd_cuda(_ELEM[q.dtype], _arg(q), _arg(k), _arg(v), cu_q.data_ptr(), cu_k.data_ptr(),
                         cu_q.numel() - 1, max_q, max_k, scale, softcap, causal, wl, wr, out.data_ptr(),
                         lse.data_ptr(), _raw_stream(device), device, 0 if used is None else used.data_ptr(),
                         0 if counters is None else counters.data_ptr(), payload)


def backward(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, scale, causal, wl, wr, softcap, dq, dk, dv, payload,
             seqused_k=None, rows=True):
    """Launches the checked backward (FA2's three launches and the group sum) writing dq, dk, dv."""
    device = q.get_device()
    q, k, v, dout = _contiguous(q), _contiguous(k), _contiguous(v), _contiguous(dout.to(q.dtype))
    H, Hk, D = q.shape[1], k.shape[1], q.shape[2]
    n = _native.ops_bwd_workspace(q.shape[0], H, D, cu_q.numel() - 1, max_q, max_k)
    workspace = torch.empty(n, dtype=torch.float32, device=q.device)
    if H != Hk:
        dkv_e = torch.empty((2, k.shape[0], H, D), dtype=k.dtype, device=k.device)
        expanded = (dkv_e[0].data_ptr(), dkv_e[1].data_ptr())
    else:
        expanded = (0, 0)
    used = _used(seqused_k)
    counters = torch.empty(q.shape[0] + k.shape[0], dtype=torch.int32, device=q.device) if rows else None
    _native.ops_bwd_cuda(_ELEM[q.dtype], _arg(q), _arg(k), _arg(v), out.data_ptr(), dout.data_ptr(), lse.data_ptr(),
                         dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), expanded[0], expanded[1], workspace.data_ptr(),
                         n, cu_q.data_ptr(), cu_k.data_ptr(), cu_q.numel() - 1, max_q, max_k, scale, softcap, causal,
                         wl, wr, _raw_stream(device), device, 0 if used is None else used.data_ptr(),
                         0 if counters is None else counters.data_ptr(), payload)


def backward_supported(dtype: torch.dtype, head_dim: int) -> bool:
    return dtype in _ELEM and _native.varlen_bwd_supported(_ELEM[dtype], head_dim) == ""
