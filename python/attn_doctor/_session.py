"""The capture session: counts calls into the hooked entry points, builds a batch document
before each call it may need, and writes the chosen ones.

Calls nest: the model's attention module calls transformers' `_flash_attention_forward`,
which calls `flash_attn_varlen_func`. Only the outermost recorded entry counts as a call
and becomes a batch file; kernel calls inside it are summarised in the manifest as what
the framework actually passed. Wrappers never change a call: arguments go through
untouched, results are returned as they are, and an exception is re-raised unchanged
after the file is written. Recording problems are reported once on stderr and otherwise
ignored.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from typing import Any, Dict, List, Optional

from . import records
from .batchfile import DEFAULT_THRESHOLD, Encoder, write_batch_file
from . import hooks
from .hooks import ENTRY_NAMES, _warn

MODES = ("first-failure", "every", "call")
MANIFEST = "manifest.jsonl"


class _Frame:
    __slots__ = ("kind", "module", "call", "doc", "encoder", "observed", "entry", "layer_idx",
                 "rotary_module")

    def __init__(self, kind: str, module: Any = None):
        self.kind, self.module = kind, module
        self.call: Optional[int] = None
        self.doc: Optional[Dict[str, Any]] = None
        self.encoder: Optional[Encoder] = None
        self.observed: List[Dict[str, Any]] = []
        self.entry = ENTRY_NAMES.get(kind, kind)
        self.layer_idx: Optional[int] = None
        self.rotary_module: Any = None


class Capture:
    """Records calls into varlen attention and writes batch files.

    mode: "first-failure" (default) writes the first call that raises; "every" writes
    every call (up to `limit`); "call" writes call number `call` (1-based; calls are the
    outermost hooked entries, in the order they start). Files go to `out` as
    `call-NNNNNN.json` (with `.npy` sidecars for arrays over `threshold` elements) and each
    written file gets a line in `out/manifest.jsonl`.
    """

    def __init__(self, out: str = "attn-doctor-capture", mode: str = "first-failure",
                 call: Optional[int] = None, limit: Optional[int] = None,
                 threshold: int = DEFAULT_THRESHOLD, announce: bool = True,
                 session: Optional[str] = None, check_command: str = "attn-doctor"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if mode == "call" and (call is None or call < 1):
            raise ValueError("mode 'call' needs call >= 1")
        self.out = out
        self.mode = mode
        self.call_number = call
        self.limit = limit
        self.threshold = threshold
        self.announce = announce
        self.session = session
        self.check_command = check_command
        self.calls = 0                       # outermost calls seen
        self.files: List[str] = []           # batch files written, in order
        self.failures: List[str] = []        # those written for a call that raised
        self._lock = threading.Lock()
        self._tls = threading.local()
        self._cache = records.HostCache()
        self._versions: Dict[str, str] = {}
        self._versions_missed: set = set()
        self._installed = False
        rank = os.environ.get("RANK")
        self._prefix = f"rank{int(rank)}-" if rank and rank.isdigit() else ""

    # -- installing ---------------------------------------------------------------------

    def install(self) -> "Capture":
        with _INSTALL_LOCK:
            if self._installed:
                return self
            hooks.attach("capture", self)
            self._installed = True
        return self

    def uninstall(self) -> None:
        with _INSTALL_LOCK:
            hooks.detach("capture", self)
            self._installed = False

    def __enter__(self) -> "Capture":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    @property
    def installed(self) -> bool:
        return self._installed

    def _stack(self) -> List[_Frame]:
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    def _begin(self, kind: str, original: Any, args: tuple, kwargs: dict) -> Optional[_Frame]:
        stack = self._stack()
        depth = len(stack)
        try:
            return self._begin_unsafe(kind, original, args, kwargs)
        except Exception as exc:
            _warn(f"recording a call into {ENTRY_NAMES.get(kind, kind)} failed: {exc!r}")
            # Replace what the failed attempt pushed (a half-built frame left on the stack
            # would make every later call look nested inside it) by a frame that records
            # nothing but keeps the call's place: kernel calls inside it stay nested.
            dropped = stack[depth:]
            del stack[depth:]
            frame = _Frame("broken")
            frame.call = next((f.call for f in dropped if f.call is not None), 0)
            stack.append(frame)
            return frame

    def _begin_unsafe(self, kind: str, original: Any, args: tuple, kwargs: dict) -> _Frame:
        stack = self._stack()
        if kind == "module_context":
            module = args[0] if args else kwargs.get("module", kwargs.get("self"))
            frame = _Frame(kind, module)
            stack.append(frame)
            return frame
        recording = next((f for f in reversed(stack) if f.call is not None), None)
        module = next((f.module for f in reversed(stack) if f.module is not None), None)
        frame = _Frame(kind, module)
        stack.append(frame)
        bound = records.bind_arguments(original, args, kwargs)
        if kind == "transformers_method":
            frame.module = bound.get("self", module)
        if recording is not None:
            # a kernel call inside a recorded transformers call: what was actually passed
            if recording.doc is not None and kind.startswith("flash_attn"):
                ctx = self._context(recording.encoder or Encoder("observed"), module)
                recording.observed.append(records.observed_kernel_call(ctx, frame.entry, bound))
            return frame
        with self._lock:
            self.calls += 1
            frame.call = self.calls
        if not self._wants(frame.call):
            return frame
        builder = records.BUILDERS["transformers" if kind == "transformers_method" else kind]
        frame.encoder = Encoder(self._stem(frame.call), self.threshold)
        layer = bound.get("layer_idx", getattr(frame.module, "layer_idx", None))
        frame.layer_idx = layer if isinstance(layer, int) else None
        if kind == "fla_rotary":
            frame.rotary_module = bound.get("self")
        ctx = self._context(frame.encoder, frame.module)
        ctx.name = self._name(frame)
        ctx.description = self._description(frame)
        frame.doc = builder(ctx, bound)
        return frame

    def _end(self, frame: Optional[_Frame], exc: Optional[BaseException]) -> None:
        try:
            stack = self._stack()
            if frame is not None and stack and stack[-1] is frame:
                stack.pop()
            elif frame is not None and frame in stack:
                stack.remove(frame)
            if frame is None or frame.call is None:
                if frame is not None and exc is not None and frame.kind.startswith("flash_attn"):
                    parent = next((f for f in reversed(stack) if f.call is not None), None)
                    if parent is not None and parent.observed:
                        parent.observed[-1]["raised"] = _exception_text(exc)
                return
            if frame.doc is None:
                return
            failed = isinstance(exc, Exception)
            if self.mode == "first-failure" and not failed:
                return
            if frame.rotary_module is not None:
                table = records.fla_rotary_table_length(frame.rotary_module)
                if table:
                    frame.doc.setdefault("rotary", {})["table_length"] = table
            if failed:
                frame.doc["description"] = (frame.doc.get("description", "")
                                            + f" The call raised {_exception_text(exc)}").strip()
            self._write(frame, exc if failed else None)
        except Exception as err:
            _warn(f"writing a batch file failed: {err!r}")

    # -- decisions and output -----------------------------------------------------------

    def _wants(self, call: int) -> bool:
        if self.mode == "call":
            return call == self.call_number
        if self.mode == "every":
            return self.limit is None or len(self.files) < self.limit
        return not self.failures  # first-failure: until one is written

    def _stem(self, call: int) -> str:
        return f"{self._prefix}call-{call:06d}"

    def _name(self, frame: _Frame) -> str:
        config = getattr(frame.module, "config", None)
        arch = records.architecture_of(config)
        parts = [arch or frame.kind.replace("_", "-")]
        if frame.layer_idx is not None:
            parts.append(f"layer{frame.layer_idx}")
        parts.append(f"call{frame.call}")
        return "-".join(parts)

    def _description(self, frame: _Frame) -> str:
        from . import __version__
        where = f" (layer {frame.layer_idx})" if frame.layer_idx is not None else ""
        return (f"Captured by attn_doctor {__version__} from {frame.entry}{where}, "
                f"call {frame.call} of the run.")

    def _context(self, encoder: Encoder, module: Any) -> records.Context:
        versions = records.library_versions(self._versions, self._versions_missed)
        return records.Context(encoder, self._cache, versions, module)

    def _write(self, frame: _Frame, exc: Optional[BaseException]) -> None:
        assert frame.doc is not None and frame.encoder is not None
        # Versions again, now that the call has run: transformers 5.x imports flash_attn
        # inside the first attention call, after this document was built.
        env = frame.doc.get("environment", {})
        versions = records.library_versions(self._versions, self._versions_missed)
        frame.doc["environment"] = dict(versions, **{k: v for k, v in env.items()
                                                       if k not in versions})
        path = os.path.join(self.out, frame.encoder.stem + ".json")
        write_batch_file(path, frame.doc, frame.encoder.sidecars)
        entry: Dict[str, Any] = {"file": os.path.basename(path), "call": frame.call,
                                 "entry": frame.entry, "name": frame.doc.get("name")}
        if frame.layer_idx is not None:
            entry["layer_idx"] = frame.layer_idx
        entry["failed"] = exc is not None
        if exc is not None:
            entry["exception"] = _exception_text(exc)
        entry["sidecars"] = [car.name for car in frame.encoder.sidecars]
        if frame.observed:
            entry["observed"] = frame.observed
        if self.session:
            entry["session"] = self.session
        entry["pid"] = os.getpid()
        with self._lock:
            with open(os.path.join(self.out, MANIFEST), "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, sort_keys=True) + "\n")
            self.files.append(path)
            if exc is not None:
                self.failures.append(path)
        if exc is not None and self.announce:
            from .diagnosis import summary
            print(f"attn-doctor: call {frame.call} into {frame.entry} raised "
                  f"{_exception_text(exc)}\nattn-doctor: wrote {path}; its diagnosis:\n"
                  f"{summary(path)}\nattn-doctor: the whole report: "
                  f"{check_command_line(self.check_command, path)}", file=sys.stderr)


def _exception_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if len(first) <= 400 else first[:397] + "..."


def check_command_line(check_command: str, path: str) -> str:
    """`attn-doctor check FILE` with FILE relative to the working directory when inside it."""
    import shlex
    rel = os.path.relpath(path)
    shown = rel if not rel.startswith("..") else os.path.abspath(path)
    return f"{check_command} check {shlex.quote(shown)}"


_INSTALL_LOCK = threading.RLock()


def capture(out: str = "attn-doctor-capture", mode: str = "first-failure",
            call: Optional[int] = None, every: bool = False, **options: Any) -> Capture:
    """Context manager recording varlen attention calls into batch files:

        with attn_doctor.capture("captures", every=True):
            model(**batch)

    `every=True` is mode "every"; `call=N` alone selects mode "call"."""
    if every:
        mode = "every"
    elif call is not None and mode == "first-failure":
        mode = "call"
    return Capture(out=out, mode=mode, call=call, **options)


def install(out: str = "attn-doctor-capture", **options: Any) -> Capture:
    """Install a capture for the rest of the process (see `capture` for the options)."""
    return capture(out, **options).install()


def uninstall() -> None:
    active = hooks.USERS.capture
    if active is not None:
        active.uninstall()


def active_capture() -> Optional[Capture]:
    return hooks.USERS.capture
