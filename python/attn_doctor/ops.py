"""Checked varlen attention as PyTorch operators: train on attn-doctor's kernels.

    from attn_doctor import ops
    out = ops.flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                     max_seqlen_k, causal=True)        # flash-attn 2's signature
    out = ops.varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k,
                          window_size=(-1, 0))                         # torch 2.11's signature

Both run the custom operators `torch.ops.attn_doctor.varlen_fwd` / `varlen_bwd`
(torch.library.custom_op, with fake implementations and autograd), so torch.compile
(fullgraph=True) captures them without a graph break. On CPU tensors the op runs attn-doctor's
CPU twin of the checked kernels (exact, slow: for tests and CI); on CUDA tensors, in an extension
built with CUDA, the checked CUDA kernels on the current stream. Every access is checked: a
refused access is not performed, the output rows no launch wrote keep NaN, and the call is
reported as a `VarlenError` carrying the report of `attn-doctor check` for it (first violation,
prediction, fix) and a batch file.

When the error is raised (`set_policy(raise_at=...)`):
  "call"  at the call that broke (on CUDA this waits for the kernel: debugging);
  "step"  (default) at the next op call, or at `check()`: no added synchronisation;
  "sync"  only at `check()`, which the caller runs after a synchronisation of its own.
On CPU everything is synchronous: "step" and "sync" only move where the error surfaces.

seqused_k (torch.ops.attn_doctor.varlen_fwd's last argument, varlen_attn's keyword): the forward
uses the first seqused_k[b] keys of segment b; the backward (FA2's, which takes none) records
the keys it runs and the forward did not, and the keys past max_seqlen_k's grid (its launch
check). apply_rotary_emb / rotary_embedding run the checked rotary (flash_attn's, FLA's) on the
CPU twin.

Calls the checked kernels do not cover (a head dim or dtype without a checked CUDA kernel, an
extension built without CUDA) run the real kernel the process has, after the host checks of
the guard, and say so once (logger "attn_doctor.ops").
"""


import json
import logging
import math
import os
import tempfile
import threading
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import records
from .batchfile import Encoder, write_batch_file
from .guard import VarlenError

try:
    from . import _native
except ImportError:  # a source checkout without the built extension
    _native = None
# the extension queues the CUDA launches (a CUDA build)
_queued = bool(getattr(_native, "cuda_backend_built", False))

LOG = logging.getLogger("attn_doctor.ops")

_ELEM = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
# the head dims of the checked CUDA kernels (kernels/launch.hpp: the forward's tensor-core and
# wgmma kernels, the backward's); others run the real kernel with the host checks
CUDA_HEAD_DIMS = (64, 96, 128, 192, 256)
_INLINE = 1 << 62

_state = threading.local()
_lock = threading.Lock()
_policy = {"raise_at": "step", "rows": True}
# broken calls not raised yet (CPU: found synchronously). The CUDA launches not read yet, and
# those captured in a CUDA graph (read at every check()), are queued in the extension
# (_native.ops_drain / ops_captured), with the _Call of each as its payload.
_pending: List["_Pending"] = []
_said: set = set()
stats = {"calls": 0, "cpu": 0, "cuda": 0, "fallback": 0, "violations": 0}


def set_policy(raise_at: str = "step", rows: bool = True) -> None:
    """Where a violation is raised: "call", "step" (default) or "sync" (module docstring).
    rows: on CUDA, count the writes of every output / dq / dk-dv row in the checked kernels and
    report rows no launch wrote or two segments wrote (the CPU twin always does). It costs a
    zeroed counter per row, folded into the launch's record by the readout kernel (measured on
    an H100 in docs/backend.md); rows=False leaves the refused accesses and the launch check only."""
    if raise_at not in ("call", "step", "sync"):
        raise ValueError(f"raise_at must be 'call', 'step' or 'sync', not {raise_at!r}")
    _policy["raise_at"] = raise_at
    _policy["rows"] = bool(rows)


def policy() -> str:
    return _policy["raise_at"]


def _say_once(key: Any, message: str) -> None:
    if key in _said:
        return
    _said.add(key)
    LOG.warning("attn-doctor ops: %s", message)


# ---------------------------------------------------------------------------------------
# what a call was, for the report

class _Call:
    """The arguments of one call, as the report needs them (the tensors are kept until the
    call's violation records are read: on CUDA after the kernel ran)."""
    __slots__ = ("api", "q", "k", "v", "cu_q", "cu_k", "max_q", "max_k", "scale", "causal", "window",
                 "softcap", "training", "pass_", "seqused_k")

    def __init__(self, api, q, k, v, cu_q, cu_k, max_q, max_k, scale, causal, window, softcap, pass_,
                 seqused_k=None):
        self.api, self.q, self.k, self.v = api, q, k, v
        self.cu_q, self.cu_k, self.max_q, self.max_k = cu_q, cu_k, max_q, max_k
        self.scale, self.causal, self.window, self.softcap = scale, causal, window, softcap
        self.pass_ = pass_
        self.seqused_k = seqused_k

    def arguments(self) -> Dict[str, Any]:
        a: Dict[str, Any] = {"q": self.q, "k": self.k, "v": self.v, "cu_seqlens_q": self.cu_q,
                             "cu_seqlens_k": self.cu_k, "max_seqlen_q": self.max_q, "max_seqlen_k": self.max_k,
                             "causal": self.causal, "softmax_scale": self.scale}
        if tuple(self.window) != (-1, -1):
            a["window_size"] = tuple(self.window)
        if self.softcap:
            a["softcap"] = self.softcap
        if self.seqused_k is not None:
            a["seqused_k"] = self.seqused_k
        return a

    def document(self, cache: records.HostCache) -> Dict[str, Any]:
        ctx = records.Context(Encoder("ops", _INLINE), cache, records.library_versions({}, set()), None)
        doc = records.flash_attn_varlen_call(ctx, self.arguments())
        if self.api == "torch.varlen_attn":
            doc["varlen"]["api"] = "torch.varlen_attn"
        doc["pass"] = self.pass_
        return doc


class _Pending:
    """A broken call, read and not raised yet."""
    __slots__ = ("call", "stage", "finding")

    def __init__(self, call: _Call, stage: str, finding: Optional[Dict[str, Any]] = None):
        self.call, self.stage, self.finding = call, stage, finding


def _unreliable(rows: Dict[str, int], what: str) -> Optional[str]:
    parts = []
    if rows.get("unwritten"):
        parts.append(f"{rows['unwritten']} {what} row(s) written by no launch (NaN; the first: row "
                     f"{rows['first_unwritten']})")
    if rows.get("overwritten"):
        parts.append(f"{rows['overwritten']} {what} row(s) written by more than one segment (the first: row "
                     f"{rows['first_overwritten']})")
    return "; ".join(parts) or None


def _finding(result: Dict[str, Any], stage: str) -> "Optional[Dict[str, Any]]":
    """What the kernel saw, or None when the call was clean."""
    access = result.get("access")
    notes = []
    if stage == "forward":
        note = _unreliable(result.get("rows", {}), "output")
        if note:
            notes.append(note)
    else:
        for key, what in (("dq_rows", "dq"), ("dkv_rows", "dk/dv")):
            note = _unreliable(result.get(key, {}), what)
            if note:
                notes.append(note)
    if access is None and not notes:
        return None
    return {"stage": stage, "access": access, "rows": notes}


def _access_text(access: Dict[str, Any]) -> str:
    region = access.get("region")
    if region in ("max_seqlen", "seqused"):
        # the backward's launch check (kernels/contract/fa2_backward.hpp): keys, not an access
        why = ("past the key blocks max_seqlen_k gives the backward's grid" if region == "max_seqlen" else
               "between seqused_k and the segment's length (the backward takes no seqused_k)")
        return (f"{access['count']} key row(s) x head(s) the backward leaves out of the gradients while the forward "
                f"used them, or the reverse ({why}); the first: k row {access.get('row')}, key "
                f"{access.get('bound')} of segment {access.get('segment')}, head {access.get('head')}")
    return (f"{access['count']} access(es) refused in the kernel; the first: {access.get('kind')} of "
            f"{access.get('buffer')} {access.get('unit')} {access.get('index')} (bound {access.get('bound')}), "
            f"segment {access.get('segment')}, row {access.get('row')}, head {access.get('head')}")


def _raise_for(p: _Pending) -> None:
    """Build the report of the broken call (attn-doctor check on its batch document, the CPU
    backend replaying it) and raise VarlenError with it."""
    with _lock:
        stats["violations"] += 1
    doc = p.call.document(records.HostCache(size=4, sync=True))
    report: Dict[str, Any] = {}
    if _native is not None:
        try:
            _, text = _native.check_text(json.dumps(doc, separators=(",", ":")), "attn_doctor.ops", backend="cpu",
                                         format="json")
            report = json.loads(text)
        except Exception as exc:  # the report is extra: the kernel's finding is raised whatever happens
            report = {"error": f"the report could not be built: {exc!r}"}
    finding = p.finding or {}
    kernel_lines = []
    if finding.get("access"):
        kernel_lines.append(_access_text(finding["access"]))
    kernel_lines += finding.get("rows", [])
    if not report.get("first_violation"):
        report["first_violation"] = {
            "id": "kernel.access" if finding.get("access") else f"{'attention' if p.stage == 'forward' else 'backward'}.coverage",
            "stage": "attention" if p.stage == "forward" else "attention_backward",
            "severity": "error",
            "message": "; ".join(kernel_lines),
            "fix": "check cu_seqlens, max_seqlen and the packed tensors the call received",
        }
    path = os.path.join(tempfile.gettempdir(), f"attn-doctor-ops-{os.getpid()}-{stats['violations']}.json")
    try:
        write_batch_file(path, doc, [])
    except OSError:
        path = None
    raise VarlenError(report, doc, f"attn_doctor.ops ({p.call.api}, {p.stage})", kernel=kernel_lines,
                      batch_file=path, ran=True)


def _drain(block: bool) -> None:
    """Read the records that are ready (all of them when `block`); raise for the first broken
    call."""
    if _pending:
        p = _pending.pop(0)
        _pending.clear()
        _raise_for(p)
    if _queued:
        read = _native.ops_drain(block)
        if read is not None:
            (call, stage), result = read
            _raise_for(_Pending(call, stage, _finding(result, stage)))


def check() -> None:
    """Raise VarlenError for the first broken call not reported yet. On CUDA this reads the
    violation records of every call made so far: run it after a synchronisation of your own
    (the end of a step), or it waits for those kernels. The launches of a captured CUDA graph
    are read again at every check (their records are those of the last replay)."""
    _drain(block=True)
    if _queued:
        for (call, stage), result in _native.ops_captured():
            finding = _finding(result, stage)
            if finding is not None:
                _raise_for(_Pending(call, stage, finding))


def pending() -> int:
    """Calls whose records are not read yet, or read and not raised."""
    return len(_pending) + (_native.ops_pending() if _queued else 0)


def _reset() -> None:
    """Forget every call not raised yet, CUDA launches unread and captured (tests, benchmarks)."""
    _pending.clear()
    if _queued:
        _native.ops_reset()


def _record(p: _Pending) -> None:
    """A call read on the host (CPU): kept when broken, raised now under "call"."""
    if p.finding is None:
        return
    _pending.append(p)
    if _policy["raise_at"] == "call":
        _drain(block=True)


def _entry() -> None:
    """At each op call: under "step", the records of earlier calls that are ready are read and
    a broken one raises here."""
    if _policy["raise_at"] == "step" and (_pending or (_queued and _native.ops_pending())):
        _drain(block=False)


# ---------------------------------------------------------------------------------------
# host checks (the guard's static checks) for calls on CPU and for the fallback

_cache = records.HostCache(size=16, sync=True)


def _static_check(call: _Call) -> None:
    """The guard's check of the call (values read: CPU tensors, or the fallback's host check).
    Raises VarlenError before anything runs when the call breaks an error-severity invariant."""
    if _native is None:
        return
    doc = call.document(_cache)
    result = _native.guard_check(json.dumps(doc, separators=(",", ":")), "attn_doctor.ops", False, False)
    if result is None:
        return
    errors, warnings, report = result
    for vid, message in warnings:
        _say_once(("warning", vid), f"{vid}: {message}")
    if not errors:
        return
    parsed = json.loads(report)
    # what FA2 refuses and the CPU twin runs: fp32 operands (the twin computes in fp32)
    accepted = {"input.dtype"} if call.q.device.type == "cpu" and call.q.dtype == torch.float32 else set()
    kept = [x for x in parsed.get("violations", []) if x.get("id") not in accepted]
    if accepted and not any(x.get("severity") == "error" for x in kept):
        return
    if accepted:
        parsed["violations"] = kept
        parsed["first_violation"] = next(x for x in kept if x.get("severity") == "error")
    with _lock:
        stats["violations"] += 1
    raise VarlenError(parsed, doc, f"attn_doctor.ops ({call.api})")


# ---------------------------------------------------------------------------------------
# the operators

def _tensor_arg(t: torch.Tensor) -> Tuple[int, ...]:
    return (t.data_ptr(), t.shape[0], t.shape[1], t.shape[2], t.stride(0), t.stride(1), t.stride(2))


def _cu_arg(t: torch.Tensor) -> Tuple[int, int]:
    return (t.data_ptr(), t.numel())


def not_covered(q: Any) -> str:
    """Why the checked kernels (or the CPU twin) do not run a call on q ("": they do)."""
    if _native is None:
        return "attn_doctor._native is not built"
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        return "q is not a (total, heads, head_dim) tensor"
    if q.device.type == "cpu":
        return "" if q.dtype in _ELEM else f"dtype {q.dtype}"
    if q.device.type != "cuda":
        return f"device {q.device.type}"
    if not getattr(_native, "cuda_backend_built", False):
        return "the extension was built without CUDA"
    if q.dtype not in (torch.bfloat16, torch.float16):
        return f"dtype {str(q.dtype).replace('torch.', '')} (checked on CUDA: bf16, fp16)"
    if q.shape[-1] not in CUDA_HEAD_DIMS:
        return f"head_dim {q.shape[-1]} (checked on CUDA: {', '.join(map(str, CUDA_HEAD_DIMS))})"
    return ""


_cuda_ops = None


def _cuda():
    """attn_doctor._cuda_ops, imported on the first CUDA call."""
    global _cuda_ops
    if _cuda_ops is None:
        from . import _cuda_ops as module
        _cuda_ops = module
    return _cuda_ops


def _on_cuda_path(q: torch.Tensor) -> bool:
    return (q.is_cuda and _native is not None and getattr(_native, "cuda_backend_built", False)
            and q.dtype in (torch.bfloat16, torch.float16) and q.shape[-1] in CUDA_HEAD_DIMS)


@torch.library.custom_op("attn_doctor::varlen_fwd", mutates_args=())
def varlen_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
               cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, softmax_scale: float,
               causal: bool, window_left: int, window_right: int, softcap: float, api: str,
               training: bool, seqused_k: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out (total_q, H, D), lse (H, total_q) fp32) of one checked varlen forward; seqused_k
    (int32, one entry per segment): the keys each segment uses."""
    _entry()
    with _lock:
        stats["calls"] += 1
    call = _Call(api, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                 (window_left, window_right), softcap, "training" if training else "forward", seqused_k)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    if q.is_cpu and _native is not None and q.dtype in _ELEM:
        _static_check(call)
        with _lock:
            stats["cpu"] += 1
        result = _native.varlen_fwd_cpu(_ELEM[q.dtype], _tensor_arg(q), _tensor_arg(k), _tensor_arg(v),
                                        _cu_arg(_int32(cu_seqlens_q)), _cu_arg(_int32(cu_seqlens_k)), max_seqlen_q,
                                        max_seqlen_k, softmax_scale, softcap, causal, window_left, window_right,
                                        out.data_ptr(), lse.data_ptr(), torch.get_num_threads(), _used_arg(seqused_k))
        _record(_Pending(call, "forward", _finding(result, "forward")))
        return out, lse
    if _on_cuda_path(q):
        with _lock:
            stats["cuda"] += 1
        _cuda().forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                        window_left, window_right, softcap, out, lse, (call, "forward"), seqused_k=seqused_k,
                        rows=_policy["rows"])
        if _policy["raise_at"] == "call":
            _drain(block=True)
        return out, lse
    return _fallback_fwd(call, out, lse)


@varlen_fwd.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
      window_right, softcap, api, training, seqused_k=None):
    return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


@torch.library.custom_op("attn_doctor::varlen_bwd", mutates_args=())
def varlen_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
               lse: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, max_seqlen_q: int,
               max_seqlen_k: int, softmax_scale: float, causal: bool, window_left: int, window_right: int,
               softcap: float, api: str, seqused_k: Optional[torch.Tensor] = None
               ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of one checked varlen backward (FA2's: whole key segments, no seqused_k;
    the forward's seqused_k is handed over for the launch check, which records the keys
    between it and the segment's length)."""
    _entry()
    with _lock:
        stats["calls"] += 1
    call = _Call(api, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                 (window_left, window_right), softcap, "training", seqused_k)
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    if q.is_cpu and _native is not None and q.dtype in _ELEM:
        with _lock:
            stats["cpu"] += 1
        dout = dout.to(q.dtype)
        result = _native.varlen_bwd_cpu(_ELEM[q.dtype], _tensor_arg(q), _tensor_arg(k), _tensor_arg(v),
                                        _tensor_arg(out), _tensor_arg(dout), lse.data_ptr(),
                                        _cu_arg(_int32(cu_seqlens_q)), _cu_arg(_int32(cu_seqlens_k)), max_seqlen_q,
                                        max_seqlen_k, softmax_scale, softcap, causal, window_left, window_right,
                                        dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), torch.get_num_threads(),
                                        _used_arg(seqused_k))
        _record(_Pending(call, "backward", _finding(result, "backward")))
        return dq, dk, dv
    if _on_cuda_path(q):
        with _lock:
            stats["cuda"] += 1
        _cuda().backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         softmax_scale, causal, window_left, window_right, softcap, dq, dk, dv, (call, "backward"),
                         seqused_k=seqused_k, rows=_policy["rows"])
        if _policy["raise_at"] == "call":
            _drain(block=True)
        return dq, dk, dv
    return _fallback_bwd(call, dout, dq, dk, dv)


@varlen_bwd.register_fake
def _(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
      window_left, window_right, softcap, api, seqused_k=None):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    (q, k, v, cu_q, cu_k, max_q, max_k, scale, causal, wl, wr, softcap, api, training, seqused_k) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, seqused_k)
    ctx.args = (max_q, max_k, scale, causal, wl, wr, softcap, api)


def _backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse, cu_q, cu_k, seqused_k = ctx.saved_tensors
    max_q, max_k, scale, causal, wl, wr, softcap, api = ctx.args
    dq, dk, dv = torch.ops.attn_doctor.varlen_bwd(grad_out, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, scale,
                                                  causal, wl, wr, softcap, api, seqused_k)
    return dq, dk, dv, None, None, None, None, None, None, None, None, None, None, None, None


varlen_fwd.register_autograd(_backward, setup_context=_setup_context)


def _training(*tensors: torch.Tensor) -> bool:
    """The call is a training step's (the report's pass): autograd records it."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _int32(t: torch.Tensor) -> torch.Tensor:
    """cu_seqlens as the kernel reads them; another dtype was refused by the host check."""
    return t if t.dtype == torch.int32 else t.to(torch.int32)


def _used_arg(seqused_k: Optional[torch.Tensor]):
    """seqused_k for the CPU twin: (pointer, entries) of an int32 CPU tensor, or None. The
    converted tensor lives in `_keep` until the call returns (the twin copies the values)."""
    if seqused_k is None:
        return None
    t = _int32(seqused_k.reshape(-1)).contiguous()
    _keep.t = t
    return (t.data_ptr(), t.numel())


_keep = threading.local()


# ---------------------------------------------------------------------------------------
# the fallback: the real kernel, after the host checks

def _reference(call: _Call) -> Tuple[torch.Tensor, torch.Tensor]:
    """Attention per segment with torch's own operators (what runs when no varlen kernel is
    installed): each segment's rows attend to its keys (the first seqused_k[b] when given),
    causal bottom-right aligned as FA2. Differentiable (no in-place writes into the operands):
    the forward runs it under no_grad, the backward through autograd. Rows of no segment get
    0 (out) and +inf (lse)."""
    q, k, v = call.q, call.k, call.v
    cu_q = [int(x) for x in _cache.get(call.cu_q)]
    cu_k = [int(x) for x in _cache.get(call.cu_k)]
    used = [int(x) for x in _cache.get(call.seqused_k)] if call.seqused_k is not None else None
    H, Hk = q.shape[1], k.shape[1]
    out = torch.zeros_like(q)
    lse = torch.full((H, q.shape[0]), float("inf"), dtype=torch.float32, device=q.device)
    wl, wr = call.window
    if call.causal:
        wr = 0
    for b in range(len(cu_q) - 1):
        q0, q1, k0 = cu_q[b], cu_q[b + 1], cu_k[b]
        k1 = k0 + used[b] if used is not None else cu_k[b + 1]
        if q1 <= q0:
            continue
        qs = q[q0:q1].transpose(0, 1).float()
        ks = k[k0:k1].transpose(0, 1).float().repeat_interleave(H // Hk, 0)
        vs = v[k0:k1].transpose(0, 1).float().repeat_interleave(H // Hk, 0)
        s = qs @ ks.transpose(1, 2) * call.scale
        if call.softcap:
            s = torch.tanh(s / call.softcap) * call.softcap
        i = torch.arange(q1 - q0, device=q.device)[:, None] + (k1 - k0) - (q1 - q0)
        j = torch.arange(k1 - k0, device=q.device)[None, :]
        keep = torch.ones_like(s[0], dtype=torch.bool)
        if wr >= 0:
            keep = keep & (j <= i + wr)
        if wl >= 0:
            keep = keep & (j >= i - wl)
        s = s.masked_fill(~keep, float("-inf"))
        m = torch.logsumexp(s, -1)
        p = torch.exp(s - m[..., None]).nan_to_num(0.0)
        rows = torch.arange(q0, q1, device=q.device)
        out = out.index_copy(0, rows, (p @ vs).transpose(0, 1).to(q.dtype))
        lse = lse.index_copy(1, rows, m.detach())
    return out, lse


def _fallback_fwd(call: _Call, out: torch.Tensor, lse: torch.Tensor):
    with _lock:
        stats["fallback"] += 1
    _say_once(("fallback", call.q.device.type, call.q.dtype, call.q.shape[-1]),
              f"no checked kernel for this call ({call.q.device.type}, {str(call.q.dtype).replace('torch.', '')}, "
              f"head_dim {call.q.shape[-1]}; checked on CUDA: bf16/fp16, head_dim "
              f"{'/'.join(map(str, CUDA_HEAD_DIMS))}, in an extension built with CUDA): the call runs unchecked "
              "kernels after the host checks (the cu_seqlens values are read: one synchronisation)")
    _static_check(call)
    with torch.no_grad():
        o, l = _reference(call)
    out.copy_(o)
    lse.copy_(l)
    return out, lse


def _fallback_bwd(call: _Call, dout, dq, dk, dv):
    with torch.enable_grad():
        q = call.q.detach().requires_grad_()
        k = call.k.detach().requires_grad_()
        v = call.v.detach().requires_grad_()
        c = _Call(call.api, q, k, v, call.cu_q, call.cu_k, call.max_q, call.max_k, call.scale, call.causal,
                  call.window, call.softcap, "training", call.seqused_k)
        o, _ = _reference(c)
        gq, gk, gv = torch.autograd.grad(o, (q, k, v), dout.to(o.dtype), allow_unused=True)
    for dst, g in ((dq, gq), (dk, gk), (dv, gv)):
        dst.copy_(g if g is not None else torch.zeros_like(dst))
    return dq, dk, dv


# ---------------------------------------------------------------------------------------
# the public signatures

def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn.flash_attn_varlen_func (flash-attn 2.8's signature) on the checked kernels.
    dropout, ALiBi and a paged KV cache are not run: such a call raises NotImplementedError.
    return_attn_probs=True returns (out, softmax_lse, None) as flash-attn does (no S matrix)."""
    if dropout_p:
        raise NotImplementedError("attn_doctor.ops: dropout is not run by the checked kernels (dropout_p=0.0)")
    if alibi_slopes is not None or block_table is not None:
        raise NotImplementedError("attn_doctor.ops: ALiBi and block_table are not run by the checked kernels")
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    wl, wr = (int(window_size[0]), int(window_size[1])) if window_size is not None else (-1, -1)
    out, lse = torch.ops.attn_doctor.varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                                                int(max_seqlen_k), scale, bool(causal), wl, wr, float(softcap or 0.0),
                                                "flash_attn.varlen", _training(q, k, v))
    if return_attn_probs:
        return out, lse, None
    return out


FLASH_ATTN_ARGUMENTS = frozenset(("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k",
                                  "dropout_p", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes",
                                  "deterministic", "return_attn_probs", "block_table"))


def torch_varlen_call(b: Dict[str, Any], a: Dict[str, Any]):
    """varlen_attn's call (any release's signature: `a` as bound, `b` under flash-attn's names
    with causal as the release computes it) on the checked kernels."""
    q = b["q"]
    scale = a.get("scale")
    s = float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    window = a.get("window_size") or (-1, -1)
    causal = bool(b.get("causal"))
    wl, wr = (-1, -1) if causal else (int(window[0]), int(window[1]))
    out, lse = torch.ops.attn_doctor.varlen_fwd(q, b["k"], b["v"], b["cu_seqlens_q"], b["cu_seqlens_k"],
                                                int(b["max_seqlen_q"]), int(b["max_seqlen_k"]), s, causal, wl, wr,
                                                0.0, "torch.varlen_attn", _training(q, b["k"], b["v"]),
                                                a.get("seqused_k"))
    aux = a.get("return_aux")
    if aux is not None and getattr(aux, "lse", False):
        return out, lse
    return out


def varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                window_size=(-1, -1), seqused_k=None):
    """torch.nn.attention.varlen.varlen_attn (torch 2.11's signature, with 2.12's seqused_k) on
    the checked kernels: causal is window_size == (-1, 0) (a tuple comparison, as torch 2.11
    makes it); with return_aux.lse set, (out, lse) is returned. seqused_k (int32, one entry
    per sequence): the keys each sequence uses in the forward; the backward (FA2's) takes none,
    so a training call whose seqused_k differs from a key segment's length is recorded by the
    backward's launch check."""
    s = float(scale) if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    window = tuple(window_size) if isinstance(window_size, tuple) else window_size
    causal = window == (-1, 0)
    wl, wr = (-1, -1) if causal else (int(window_size[0]), int(window_size[1]))
    out, lse = torch.ops.attn_doctor.varlen_fwd(query, key, value, cu_seq_q, cu_seq_k, int(max_q), int(max_k), s,
                                                causal, wl, wr, 0.0, "torch.varlen_attn", _training(query, key, value),
                                                seqused_k)
    if return_aux is not None and getattr(return_aux, "lse", False):
        return out, lse
    return out


# ---------------------------------------------------------------------------------------
# checked rotary: flash_attn's apply_rotary_emb and FLA's rotary_embedding

_ROTARY = {"flash_attn": 0, "fla": 1}


def _rotary_findings(result: Dict[str, Any]) -> List[Tuple[str, str]]:
    """(violation id, what the twin saw) of one rotary call, the most severe first."""
    found = []
    for key, what in (("table", "cos/sin table"), ("outside_tensor", "tensor")):
        a = result.get(key)
        if a:
            found.append(("rotary.access", f"{a['count']} access(es) outside the {what} refused; the first: "
                          f"{a.get('kind')} of {a.get('buffer')} element {a.get('index')} (bound {a.get('bound')}), "
                          f"row {a.get('row')}, head {a.get('head')}"))
    a = result.get("outside_head")
    if a:
        found.append(("rotary.access", f"{a['count']} access(es) outside the row's head (performed: they change the "
                      f"next head); the first: {a.get('kind')} of element {a.get('index')}, row {a.get('row')}"))
    rows = result.get("rows") or {}
    if rows.get("unwritten"):
        found.append(("result.finite", f"{rows['unwritten']} output row(s) no program wrote (the new tensor's "
                      f"torch.empty_like contents, NaN here; the first: row {rows['first_unwritten']})"))
    elif result.get("left") and not found:
        found.append(("rotary.table", f"{result['left']} (row, head) pair(s) at a position outside the cos/sin table "
                      "left unrotated"))
    if result.get("not_visited"):
        found.append(("rotary.access", f"{result['not_visited']} row(s) of a segment past max_seqlen's grid left "
                      "unrotated"))
    return found


def _rotary_run(x, cos, sin, contract, interleaved, inplace, offsets, cu, max_seqlen, conjugate, api):
    if _native is None:
        raise RuntimeError("attn_doctor.ops: the checked rotary needs attn_doctor._native")
    if x.dtype not in _ELEM:
        raise NotImplementedError(f"attn_doctor.ops: the checked rotary runs bf16, fp16 and fp32, not {x.dtype}")
    device = x.device
    if device.type != "cpu":
        _say_once(("rotary", device.type), f"{api} on {device.type} tensors runs the CPU twin of the checked rotary "
                  "kernel on a host copy (a synchronisation and two copies per call): no checked device rotary is "
                  "bound yet")
    varlen = cu is not None
    shape = x.shape
    if varlen:
        flat = x.reshape(-1, shape[-2], shape[-1])
        seqlen = 0
    else:
        if x.dim() != 4:
            raise ValueError(f"{api}: x must be (batch, seqlen, heads, head_dim) without cu_seqlens, got {tuple(shape)}")
        flat = x.reshape(shape[0] * shape[1], shape[2], shape[3])
        seqlen = shape[1]
    xc = flat.detach().to("cpu").contiguous()
    out = torch.empty_like(xc)
    cos_c = cos.detach().to("cpu", torch.float32).contiguous()
    sin_c = sin.detach().to("cpu", torch.float32).contiguous()
    if isinstance(offsets, torch.Tensor) and offsets.dim() > 0:
        offs, per_sequence = [int(v) for v in offsets.reshape(-1).tolist()], True
    else:
        offs, per_sequence = [int(offsets)], False
    cu_c = _int32(cu.detach().to("cpu")).contiguous() if varlen else None
    result = _native.rotary_cpu(_ELEM[x.dtype], _ROTARY[contract], _tensor_arg(xc), out.data_ptr(), cos_c.shape[-1],
                                bool(interleaved), bool(inplace), cos_c.data_ptr(), sin_c.data_ptr(), cos_c.shape[0],
                                varlen, (cu_c.data_ptr(), cu_c.numel()) if varlen else (0, 0),
                                int(max_seqlen or 0), int(seqlen), per_sequence, offs, 8, bool(conjugate),
                                torch.get_num_threads())
    found = _rotary_findings(result)
    if found:
        with _lock:
            stats["violations"] += 1
        vid, message = found[0]
        report = {"first_violation": {"id": vid, "stage": "rotary", "severity": "error", "message": message,
                                      "fix": "check the seqlen_offsets, cu_seqlens / max_seqlen and the cos/sin table "
                                             "the rotary call received"}}
        doc = {"rotary": {"implementation": contract, "dim": 2 * cos_c.shape[-1], "table_length": cos_c.shape[0],
                          "seqlen_offset": offs if per_sequence else offs[0], "varlen": varlen,
                          "interleaved": bool(interleaved)}}
        raise VarlenError(report, doc, f"attn_doctor.ops ({api}{', backward' if conjugate else ''})",
                          kernel=[m for _, m in found], ran=True)
    return out.reshape(shape).to(device)


class _CheckedRotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, contract, interleaved, inplace, offsets, cu, max_seqlen, api):
        ctx.args = (cos, sin, contract, interleaved, offsets, cu, max_seqlen, api)
        y = _rotary_run(x, cos, sin, contract, interleaved, inplace, offsets, cu, max_seqlen, False, api)
        if inplace:
            x.copy_(y)
            ctx.mark_dirty(x)
            return x
        return y

    @staticmethod
    def backward(ctx, grad):
        cos, sin, contract, interleaved, offsets, cu, max_seqlen, api = ctx.args
        dx = _rotary_run(grad, cos, sin, contract, interleaved, False, offsets, cu, max_seqlen, True, api)
        return dx, None, None, None, None, None, None, None, None, None


def apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0, cu_seqlens=None,
                     max_seqlen=None):
    """flash_attn.layers.rotary.apply_rotary_emb (flash-attn 2.x's signature) on the CPU twin of
    the checked rotary kernel (flash_attn/ops/triton/rotary.py's geometry: the grid from
    max_seqlen, the table masked only from above). x: (batch, seqlen, heads, head_dim), or
    (total, heads, head_dim) with cu_seqlens and max_seqlen; cos, sin: (seqlen_ro, rotary_dim / 2);
    seqlen_offsets: an int or one per sequence. A refused access (a negative position reading
    before the table, a row past x), rows left unrotated past the table or past max_seqlen's
    grid raise VarlenError (rotary.access, rotary.table). The backward is the same kernel with
    the opposite angle, checked the same way."""
    if cu_seqlens is not None and max_seqlen is None:
        raise AssertionError("If cu_seqlens is passed in, then max_seqlen must be passed")
    return _CheckedRotary.apply(x, cos, sin, "flash_attn", interleaved, inplace, seqlen_offsets, cu_seqlens, max_seqlen,
                                "flash_attn.apply_rotary_emb")


def rotary_embedding(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0, cu_seqlens=None):
    """fla.modules.rotary.rotary_embedding (FLA's signature, without chunk_indices) on the CPU twin
    of the checked rotary kernel (fla/modules/rotary: chunks of every segment, positions below 0
    or past the table masked: the row is not written). x: [B, T, H, D] (B = 1 with cu_seqlens);
    cos, sin: [TR, R / 2]. Output rows no program writes (a new tensor, inplace=False: FLA's
    torch.empty_like) raise VarlenError (result.finite), as do refused accesses (rotary.access)."""
    return _CheckedRotary.apply(x, cos, sin, "fla", interleaved, inplace, seqlen_offsets, cu_seqlens, None,
                                "fla.rotary_embedding")
