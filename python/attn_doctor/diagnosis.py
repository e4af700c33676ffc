"""`attn_doctor.check(batch) -> report`: `attn-doctor check` from Python.

`batch` is a batch file's path or a batch document (a dict, as the capture writes it). The
report is the dict `attn-doctor check --format json` prints (docs/spec/report-format.md):
`status`, `first_violation` (id, message, fix, ...), `violations`, `prediction`, `varlen`,
`stages`. It runs the package's extension (attn_doctor._native, the same library as the
binary) in a child process with a time limit (`timeout`, 300 s by default, as `repro`
gives each case): a batch file from a bug report can hold whatever its author wrote, and
however long its check takes or however much memory it needs, the caller gets a report, an
exception, or CheckTimeout within the limit, and keeps none of the memory. Where the
extension is missing (a source checkout that was not built for this Python) the binary is
run instead, with the same limit. Invalid input raises InputError (a ValueError) naming the
file, the JSON path, what was expected and what was found.
"""
from __future__ import annotations

import json
import marshal
import os
import signal
import subprocess
import sys
from typing import Any, Dict, Optional, Tuple, Union

from . import _binary

try:
    from . import _native
except ImportError:  # a source checkout without the built extension
    _native = None

if _native is not None:
    InputError = _native.InputError
else:
    class InputError(ValueError):
        """An invalid batch: the file, the JSON path, what was expected and what was found."""


class CheckTimeout(TimeoutError, RuntimeError):
    """The check ran past its time limit and was stopped (a TimeoutError, and a RuntimeError
    as every other failure to produce a report is)."""


Batch = Union[str, bytes, "os.PathLike[str]", Dict[str, Any]]

DEFAULT_TIMEOUT = 300.0  # seconds; `repro --timeout`'s default
_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_check_child.py")


def check(batch: Batch, *, backend: str = "auto", transformers: Optional[str] = None,
          flash_attn: Optional[str] = None, seed: int = 0, budget: int = 0, full: bool = False,
          strict: bool = False, timeout: Optional[float] = DEFAULT_TIMEOUT) -> Dict[str, Any]:
    """The report of `attn-doctor check` for a batch file path or a batch document, as a
    dict. Options as the command line's: backend "auto" (CUDA when a device is present),
    "cpu", "cuda" or "none" (static checks only), the transformers / flash-attn releases to
    replay instead of the file's, the seed and budget of the dynamic stages, full arrays,
    warnings as failures. The check runs in a child process: past `timeout` seconds (None:
    no limit) it is stopped and CheckTimeout is raised."""
    _, text = render(batch, format="json", backend=backend, transformers=transformers,
                     flash_attn=flash_attn, seed=seed, budget=budget, full=full, strict=strict,
                     timeout=timeout)
    return json.loads(text)


def render(batch: Batch, *, format: str = "text", backend: str = "auto",
           transformers: Optional[str] = None, flash_attn: Optional[str] = None, seed: int = 0,
           budget: int = 0, full: bool = False, strict: bool = False,
           color: bool = False, timeout: Optional[float] = DEFAULT_TIMEOUT) -> Tuple[int, str]:
    """(exit code, report as `format` "text" or "json") for one batch, as the binary prints it."""
    options = dict(backend=backend, format=format, transformers=transformers or "",
                   flash_attn=flash_attn or "", seed=seed, budget=budget, full=full,
                   strict=strict, color=color)
    if isinstance(batch, dict):
        text = json.dumps(batch)
        origin = os.path.join(os.getcwd(), str(batch.get("name") or "batch") + ".json")
        if _native is None:
            raise RuntimeError("checking a batch document needs attn_doctor's extension "
                               "(attn_doctor._native, built by `pip install .`); write the document "
                               "to a file and pass its path instead")
        return _in_child({"text": text, "origin": os.fsencode(origin), "options": options}, timeout)
    path = os.fsencode(batch)  # a file name need not be UTF-8
    if _native is not None:
        return _in_child({"path": path, "options": options}, timeout)
    return _run_binary(path, options, timeout)


def _in_child(request: Dict[str, Any], timeout: Optional[float]) -> Tuple[int, str]:
    """The extension's check_file / check_text in a child process (_check_child.py), its
    answer or exception handed back as if it had run here."""
    argv = [sys.executable, "-I", "-S", _CHILD, _native.__file__]
    # its own session: the time limit (and a KeyboardInterrupt here) ends whatever it started
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = child.communicate(marshal.dumps(request), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(child)
        raise CheckTimeout(f"attn-doctor check: stopped after the time limit of {timeout:g} s") from None
    except BaseException:
        _kill(child)
        raise
    try:
        answer = marshal.loads(out) if child.returncode == 0 else None
    except (EOFError, ValueError, TypeError):
        answer = None
    if not isinstance(answer, dict):
        if child.returncode < 0:
            try:
                name = f" ({signal.Signals(-child.returncode).name})"
            except ValueError:
                name = ""
            why = f"died with signal {-child.returncode}{name}"
        else:
            why = f"exited with {child.returncode}"
        detail = err.decode("utf-8", "replace").strip()
        raise RuntimeError(f"attn-doctor check {why} without a report" + (f": {detail}" if detail else ""))
    kind = answer.get("error")
    if kind is None:
        return answer["code"], answer["report"]
    message = answer.get("message", "")
    if kind == "InputError":
        raise InputError(message)
    if kind == "CapabilityError":
        raise _native.CapabilityError(message)
    if kind == "ValueError":
        raise ValueError(message)
    raise RuntimeError(message)


def _kill(child: "subprocess.Popen[bytes]") -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(child.pid, signal.SIGKILL)  # the child and whatever it started
        else:
            child.kill()
    except (ProcessLookupError, PermissionError):
        pass
    child.communicate()


def _run_binary(path: bytes, options: Dict[str, Any], timeout: Optional[float]) -> Tuple[int, str]:
    binary = _binary.find()
    if binary is None:
        raise RuntimeError(_binary.not_found_message())
    argv = [binary, "check", path, "--format", options["format"], "--backend", options["backend"],
            "--seed", str(options["seed"])]
    for flag, key in (("--transformers", "transformers"), ("--flash-attn", "flash_attn")):
        if options[key]:
            argv += [flag, options[key]]
    if options["budget"]:
        argv += ["--budget", str(options["budget"])]
    argv += [flag for flag, key in (("--full", "full"), ("--strict", "strict")) if options[key]]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CheckTimeout(f"attn-doctor check: stopped after the time limit of {timeout:g} s") from None
    if done.returncode == 2:
        raise InputError(done.stderr.strip().removeprefix("attn-doctor: invalid input: "))
    if done.returncode not in (0, 1, 3) or not done.stdout:
        raise RuntimeError(done.stderr.strip() or f"attn-doctor exited with {done.returncode}")
    return done.returncode, done.stdout


def summary(path: str, backend: str = "cpu", max_lines: int = 30) -> str:
    """The first lines of `attn-doctor check PATH` (header, prediction, first violation with
    its fix), indented for a message, or why there is none. The capture prints it for a call
    that failed. The CPU backend by default: after a failed call the process's CUDA context
    may be unusable, and the diagnosis must not depend on it."""
    try:
        code, text = render(path, format="text", backend=backend)
    except Exception as exc:  # the capture's own report must not fail because of this
        return f"  (no diagnosis: {exc})"
    lines = text.splitlines()
    kept = []
    for line in lines:
        if line.startswith(("also violated:", "varlen ", "stages:")):
            break
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    if len(kept) > max_lines:
        kept = kept[:max_lines] + ["..."]
    verdict = next((line for line in reversed(lines) if line.startswith("verdict:")), "")
    if verdict:
        kept.append(verdict)
    return "\n".join("  " + line if line else "" for line in kept)
