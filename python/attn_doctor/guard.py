"""The guard: check every varlen attention call before it runs, in-process.

    import attn_doctor

    with attn_doctor.guard():            # or attn_doctor.guard.install() for the whole process
        trainer.train()

    python -m attn_doctor.guard [--no-sync] [--nested] [--strict] [--kernels] -- python train.py ...

Before each hooked call (the capture's hooks: transformers' `_flash_attention_forward`,
`flash_attn_varlen_func` / `flash_attn_func`, FLA's `RotaryEmbedding.forward`), the
arguments actually passed are described as a batch document (the capture's own builders)
and checked by the package's extension (attn_doctor._native: the replay and the static
checks of `attn-doctor check --backend none`, no subprocess). A call that breaks an
error-severity invariant raises `VarlenError` instead of reaching the kernel, carrying the
report (first violation, prediction, fix) and the batch document. Warnings are logged once
per invariant (logger "attn_doctor.guard") and the call goes on; so is each row of the advisory
table the call matches (a known bug of the releases in use, e.g. TRANSFORMERS-2025-002, said
once under its id with the fixing release).

Cost. Reading index tensors (mask, position ids, cu_seqlens, a 0-d max_seqlen) that live
on the GPU copies them to the host: the CPU waits for the GPU once (a synchronisation).
Each copy is cached while the same unmodified tensor is passed again, and a call whose
arguments match an earlier one (same index tensors, same q/k/v shapes, dtypes, devices
and strides, same options) reuses its verdict: every layer after the first of a forward
costs a dictionary look-up. With `sync=False` (`--no-sync`) device tensors are never read:
such a call is checked for what needs no values (the `input` invariants: dtypes, head
dims, GQA, features), host tensors and tensors already read are checked in full.
Inside a checked transformers call the kernel call it makes is not checked again (the
replay of that release's conversion already covered it) unless `nested=True`.

The model entry (`PreTrainedModel.__call__`) is hooked too: when the model's forward received
a mask holding segment ids, a transformers call is checked with that mask at model level
(`"level": "model"`), so the replay runs the release's mask preparation (transformers >= 4.53
casts it to bool, merging the packed sequences) and `mask.cast_to_bool` names the cause where
the attention itself only sees a valid 0/1 mask.

A problem inside the guard itself (a call it cannot describe) is logged once and never
stops the call.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import types
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _tensors as T
from . import hooks, records
from .batchfile import Encoder, write_batch_file
from .hooks import ENTRY_NAMES

try:
    from . import _native
except ImportError:  # a source checkout without the built extension
    _native = None

LOG = logging.getLogger("attn_doctor.guard")

# Arguments described by their metadata only (shape, dtype, device, strides): their values
# never matter to a check. Every other tensor argument is an index tensor (mask, position
# ids, cu_seqlens, offsets, a 0-d max_seqlen) whose values do.
_PAYLOAD = frozenset(("query_states", "key_states", "value_states", "q", "k", "v"))
_INLINE = 1 << 62  # the guard writes no sidecar files: every array inline


class VarlenError(RuntimeError):
    """A varlen attention call that breaks an invariant, stopped before the kernel ran.

    report      the report (dict) of `attn-doctor check --backend none` for the call
    violation   its first violation (id, stage, severity, message, fix, references)
    prediction  what the real stack would have done (outcome, message, basis), when known
    batch       the batch document of the call: `err.save("call.json")` writes it, and
                `attn-doctor check call.json` replays it
    entry       the hooked function, e.g. "flash_attn.flash_attn_varlen_func"
    kernel      (attn_doctor.ops) what the checked kernel saw: the refused accesses and the rows
                no launch wrote (NaN) or more than one segment wrote; empty when the host
                check stopped the call
    batch_file  (attn_doctor.ops) where the batch file was written, or None
    ran         the call ran (attn_doctor.ops: on the checked kernels, every refused access
                not performed) rather than being stopped before the kernel
    """

    def __init__(self, report: Dict[str, Any], batch: Dict[str, Any], entry: str,
                 kernel: Optional[List[str]] = None, batch_file: Optional[str] = None, ran: bool = False):
        self.report = report
        self.batch = batch
        self.entry = entry
        self.kernel: List[str] = list(kernel or [])
        self.batch_file = batch_file
        self.ran = ran
        self.violation: Dict[str, Any] = report.get("first_violation") or {}
        self.prediction: Optional[Dict[str, Any]] = report.get("prediction")
        self.id: str = self.violation.get("id", "")
        self.fix: str = self.violation.get("fix", "")
        super().__init__(self._text())

    def _text(self) -> str:
        v = self.violation
        errors = sum(1 for x in self.report.get("violations", []) if x.get("severity") == "error")
        lines = [f"{self.entry}: {v.get('id')} [{v.get('stage')}, {v.get('severity')}]: {v.get('message')}"]
        p = self.prediction
        if p:
            line = f"prediction: {p.get('outcome')}"
            if p.get("pass"):
                line += f" ({p['pass']})"
            if p.get("message"):
                line += f": {p['message']}"
            if p.get("basis"):
                line += f"  [{p['basis']}]"
            lines.append(line)
        if self.fix:
            lines.append(f"fix: {self.fix}")
        for line in self.kernel:
            lines.append(f"kernel: {line}")
        if self.ran:
            lines.append(f"({errors} error(s) in the report; the call ran on the checked kernels, no refused access "
                         "performed; err.report holds the report"
                         + (f", `attn-doctor check {self.batch_file}` replays it)" if self.batch_file else ")"))
        else:
            lines.append(f"({errors} error(s) in all; the call was not run. err.report holds the report, "
                         "err.save(PATH) writes the batch file for `attn-doctor check PATH`)")
        return "\n".join(lines)

    def save(self, path: str) -> str:
        """Write the call's batch file (for `attn-doctor check`); returns the path."""
        write_batch_file(path, self.batch, [])
        return path


class _Frame:
    __slots__ = ("kind", "module", "checked")

    def __init__(self, kind: str, module: Any):
        self.kind, self.module, self.checked = kind, module, False


class Guard:
    """Checks every hooked varlen call before it runs (see the module's documentation).

    sync      read index tensors from the device (one synchronisation per new tensor);
              False: check only what needs no device read
    nested    also check kernel calls made inside a checked transformers call
    strict    warnings count as errors (raise)
    warnings  "log" (once per invariant, the default), "ignore"
    kernels   run flash_attn_varlen_func and torch's varlen_attn on attn_doctor.ops (the checked
              kernels: every access checked on the device, no host read of index values) where
              they cover the call; other calls run the real kernel after the host check, and
              say so once
    """

    def __init__(self, sync: bool = True, nested: bool = False, strict: bool = False,
                 warnings: str = "log", cache_size: int = 64, kernels: bool = False):
        if _native is None:
            raise RuntimeError("the guard needs attn_doctor's extension (attn_doctor._native); "
                               "install the package with `pip install .` from the attn-doctor repository")
        if warnings not in ("log", "ignore"):
            raise ValueError(f"warnings must be 'log' or 'ignore', not {warnings!r}")
        self.sync, self.nested, self.strict, self.warnings = sync, nested, strict, warnings
        self.kernels = kernels
        self.cache_size = cache_size
        # counters: calls seen, checked by the extension, answered from the verdict cache,
        # checked without values (no sync), raised
        self.stats = {"calls": 0, "checked": 0, "cached": 0, "metadata_only": 0, "raised": 0}
        self._verdicts: Dict[Any, Tuple[Any, List[Any]]] = {}
        self._reads: Dict[str, set] = {}   # kind -> names of the arguments its builder reads
        self._host = records.HostCache(size=16, sync=sync)
        self._versions: Dict[str, str] = {}
        self._versions_missed: set = set()
        self._warned: set = set()
        self._lock = threading.Lock()
        self._tls = threading.local()
        self._installed = False

    # -- installing ---------------------------------------------------------------------

    def install(self) -> "Guard":
        if not self._installed:
            hooks.attach("guard", self)
            self._installed = True
        return self

    def uninstall(self) -> None:
        hooks.detach("guard", self)
        self._installed = False

    def __enter__(self) -> "Guard":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    @property
    def installed(self) -> bool:
        return self._installed

    # -- called by the hooks' wrappers --------------------------------------------------

    def _stack(self) -> List[_Frame]:
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    def _enter(self, kind: str, original: Any, args: tuple, kwargs: dict) -> _Frame:
        stack = self._stack()
        if kind == "module_context":
            frame = _Frame(kind, args[0] if args else kwargs.get("module", kwargs.get("self")))
            stack.append(frame)
            return frame
        module = next((f.module for f in reversed(stack) if f.module is not None), None)
        inside_checked = any(f.checked for f in stack)
        frame = _Frame(kind, module)
        stack.append(frame)
        if inside_checked and not self.nested:
            return frame
        frame.checked = True
        if self.kernels and self.kernel_for(kind, original, args, kwargs) is not None:
            return frame  # the checked kernels check this call (on the device)
        try:
            self._check(kind, original, args, kwargs, module)
        except VarlenError:
            self._exit(frame)  # the call does not run: the wrappers get no frame to close
            raise
        except Exception as exc:  # the guard's own problem never stops the call
            self._warn_once(("internal", kind, type(exc).__name__),
                            f"could not check a call into {ENTRY_NAMES.get(kind, kind)}: {exc!r}")
        return frame

    def _exit(self, frame: Optional[_Frame]) -> None:
        stack = self._stack()
        if frame is not None and stack and stack[-1] is frame:
            stack.pop()
        elif frame is not None and frame in stack:
            stack.remove(frame)

    # -- the check ----------------------------------------------------------------------

    def _check(self, kind: str, original: Any, args: tuple, kwargs: dict, module: Any) -> None:
        with self._lock:
            self.stats["calls"] += 1
        bound = _ReadTracker(records.bind_arguments(original, args, kwargs))
        reads = self._reads.setdefault(kind, set())
        key = self._key(kind, module, bound, reads) if reads else None
        verdict = self._verdicts.get(key[0]) if key is not None else None
        if verdict is not None:
            with self._lock:
                self.stats["cached"] += 1
            self._act(verdict[0])
            return
        entry = ENTRY_NAMES.get(kind, kind)
        builder = records.BUILDERS["transformers" if kind == "transformers_method" else kind]
        ctx = records.Context(Encoder("guard", _INLINE), self._host,
                              records.library_versions(self._versions, self._versions_missed), module)
        metadata_only = False
        bound.read.clear()
        try:
            doc = builder(ctx, bound)
        except records.NeedsSync:
            if kind == "te_dpa":  # TE's contract has no index-free invariants here
                return
            doc = _metadata_document(kind, ctx, bound)
            metadata_only = True
        if doc is None:  # a call the builder does not describe (TE outside qkv_format "thd")
            return
        if key is None or not bound.read <= reads:  # it read an argument no key held yet
            reads |= bound.read
            key = self._key(kind, module, bound, reads)
        # advisories=True: a known bug of the releases in use that this call meets (the advisory
        # table) comes back as a warning entry under its id, said once like a warning, never raised
        result = _native.guard_check(json.dumps(doc, separators=(",", ":")), "guard: " + entry, self.strict,
                                     metadata_only, True)
        with self._lock:
            self.stats["checked"] += 1
            self.stats["metadata_only"] += metadata_only
        outcome = (entry, doc, result)
        self._verdicts[key[0]] = (outcome, key[1])
        if len(self._verdicts) > self.cache_size:
            self._verdicts.pop(next(iter(self._verdicts)))
        self._act(outcome)

    @staticmethod
    def _key(kind: str, module: Any, bound: "_ReadTracker", reads: set) -> Tuple[Any, List[Any]]:
        """(verdict-cache key, objects it identifies by id) of a call: every argument the
        document builder reads (learnt from the builds so far), so arguments that only label
        a call (a layer index) do not split the cache."""
        refs: List[Any] = []
        items = bound.data
        # the mask the running model received (hooks.model_inputs): a transformers call's
        # document gives it when it holds segment ids, so it is part of what the verdict reads
        frame = hooks.model_inputs() if kind in ("transformers", "transformers_method") else None
        model_mask = _key_of("attention_mask", frame.attention_mask, refs) if frame is not None else None
        key = (kind, id(getattr(module, "config", None)), _training(items), model_mask,
               tuple([(name, _key_of(name, items[name], refs)) for name in sorted(reads) if name in items]))
        return key, refs

    def _act(self, outcome: Tuple[str, Dict[str, Any], Any]) -> None:
        entry, doc, result = outcome
        if result is None:
            return
        errors, warnings, report = result
        if self.warnings == "log":
            for vid, message in warnings:
                self._warn_once(("warning", vid), f"{entry}: {vid}: {message}")
        if errors:
            with self._lock:
                self.stats["raised"] += 1
            raise VarlenError(json.loads(report), doc, entry)

    _KERNEL_KINDS = ("flash_attn_varlen", "torch_varlen")

    def kernel_for(self, kind: str, original: Any, args: tuple, kwargs: dict) -> Any:
        """The attn_doctor.ops function that runs this call on the checked kernels, or None
        (another entry, an argument they do not run, a tensor they do not cover: the real
        kernel runs after the host check, and the first such call says so)."""
        if kind not in self._KERNEL_KINDS:
            return None
        try:
            from . import ops
            a = records.bind_arguments(original, args, kwargs)
        except Exception as exc:
            self._warn_once(("kernels", "import"), f"--kernels: attn_doctor.ops unavailable ({exc!r})")
            return None
        q = a.get("q", a.get("query"))
        why = ops.not_covered(q)
        if kind == "flash_attn_varlen":
            if a.get("dropout_p") or a.get("alibi_slopes") is not None or a.get("block_table") is not None:
                why = why or "dropout, ALiBi or a paged KV cache"
        elif a.get("block_table") is not None or a.get("num_splits"):
            why = why or "block_table or num_splits"
        if why:
            self._warn_once(("kernels", kind, why), f"--kernels: a call into {ENTRY_NAMES.get(kind, kind)} runs the "
                            f"real kernel with the host checks: {why}")
            return None
        if kind == "flash_attn_varlen":
            return lambda *_a, **_k: ops.flash_attn_varlen_func(**{n: x for n, x in a.items()
                                                                 if n in ops.FLASH_ATTN_ARGUMENTS})
        b = records.torch_varlen_arguments(a)
        return lambda *_a, **_k: ops.torch_varlen_call(b, a)

    def _warn_once(self, key: Any, message: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        LOG.warning("attn-doctor guard: %s", message)


class _ReadTracker:
    """The bound arguments, remembering which of them a document builder reads."""
    __slots__ = ("data", "read")

    def __init__(self, data: Dict[str, Any]):
        self.data, self.read = data, set()

    def get(self, name: str, default: Any = None) -> Any:
        self.read.add(name)
        return self.data.get(name, default)

    def __getitem__(self, name: str) -> Any:
        self.read.add(name)
        return self.data[name]

    def __contains__(self, name: str) -> bool:
        self.read.add(name)
        return name in self.data

    def keys(self):
        """Every name: a builder that copies the arguments (dict(tracker)) reads them all."""
        return self.data.keys()


def _training(bound: Dict[str, Any]) -> bool:
    """Whether this call will run a backward pass (the document's "pass")."""
    return records.call_pass(bound.get("query_states", bound.get("q"))) == "training"


def _key_of(name: str, value: Any, refs: List[Any]) -> Any:
    """What identifies an argument for the verdict cache. Index tensors by identity and
    version (the cache keeps them alive, so the id cannot be reused while cached); q/k/v by
    metadata; plain values by value; anything else by identity."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if T.is_tensor(value):
        shape = tuple(value.shape)
        if name in _PAYLOAD:
            stride = value.stride() if hasattr(value, "stride") else ()
            return (shape, value.dtype, getattr(value, "device", None), tuple(stride))
        refs.append(value)
        return ("tensor", id(value), getattr(value, "_version", None), shape)
    if isinstance(value, (tuple, list)) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return tuple(value)
    refs.append(value)
    return ("object", id(value))


def _metadata_document(kind: str, ctx: records.Context, bound: Dict[str, Any]) -> Dict[str, Any]:
    """The call described without reading any device tensor: q/k/v's true sizes as one dense
    call (a packed (total, H, D) q as one row of `total` tokens), for the checks that need no
    index values (the extension keeps only the `input` invariants of such a document)."""
    q = bound.get("query_states", bound.get("q", bound.get("query")))
    k = bound.get("key_states", bound.get("k", bound.get("key")))
    v = bound.get("value_states", bound.get("v", bound.get("value")))
    qs, ks = T.shape(q), T.shape(k if k is not None else q)
    if len(qs) == 4:
        batch = {"batch_size": qs[0], "query_length": qs[1], "kv_length": ks[1]}
    else:  # packed (total, H, D)
        batch = {"batch_size": 1, "query_length": qs[0], "kv_length": ks[0]}
    model = records.metadata_model(ctx, kind, q, k, bound)
    tensors: Dict[str, Dict[str, Any]] = {}
    records.qkv_overrides(tensors, q, k, v, model["dtype"], T.dtype_name(q))
    return records.document(ctx, records.environment(ctx, q), model, q=q, batch=batch, tensors=tensors)


# -- the module is callable: attn_doctor.guard(...) is a Guard ------------------------------

_DEFAULT: Optional[Guard] = None


def install(**options: Any) -> Guard:
    """Install a guard for the rest of the process (options as Guard's); returns it."""
    global _DEFAULT
    if hooks.USERS.guard is not None:
        return hooks.USERS.guard
    _DEFAULT = Guard(**options).install()
    return _DEFAULT


def uninstall() -> None:
    active = hooks.USERS.guard
    if active is not None:
        active.uninstall()


def active_guard() -> Optional[Guard]:
    return hooks.USERS.guard


# -- python -m attn_doctor.guard -- CMD ------------------------------------------------------

def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m attn_doctor.guard",
        description="Run a command with every varlen attention call checked before it runs: "
                    "a call that breaks an invariant raises attn_doctor.VarlenError instead "
                    "of crashing the kernel or computing the wrong thing.")
    parser.add_argument("--no-sync", action="store_true",
                        help="never read index tensors from the device (no synchronisation); "
                             "such calls are checked for dtypes, head dims, GQA and features only")
    parser.add_argument("--nested", action="store_true",
                        help="also check kernel calls made inside a checked transformers call")
    parser.add_argument("--strict", action="store_true", help="warnings raise too")
    parser.add_argument("--kernels", action="store_true",
                        help="run flash_attn_varlen_func and torch's varlen_attn on attn-doctor's checked "
                             "kernels (attn_doctor.ops): every access checked on the device, no host sync")
    parser.add_argument("--quiet-warnings", action="store_true", help="do not log warnings")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- followed by the command to run")
    args = parser.parse_args(list(argv))
    from .capture import command_after_dashes
    args.command = command_after_dashes(parser, args.command)
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if _native is None:
        print("attn-doctor: cannot run: the guard needs attn_doctor's extension "
              "(attn_doctor._native); install the package with `pip install .`", file=sys.stderr)
        return 3
    from .capture import bootstrap_environment, run_child
    config = {"sync": not args.no_sync, "nested": args.nested, "strict": args.strict,
              "warnings": "ignore" if args.quiet_warnings else "log"}
    if args.kernels:
        config["kernels"] = True
    env = bootstrap_environment(dict(os.environ))
    env["ATTN_DOCTOR_GUARD"] = json.dumps(config, sort_keys=True)
    status = run_child(args.command, env)
    return 127 if status is None else status


class _CallableModule(types.ModuleType):
    """`attn_doctor.guard(...)` is a Guard (a context manager), and `attn_doctor.guard.install()`
    installs one for the process: the module object is callable."""

    def __call__(self, **options: Any) -> Guard:
        return Guard(**options)


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = _CallableModule
