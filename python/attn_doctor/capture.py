"""`python -m attn_doctor.capture [--out DIR] [--every|--call N|--first-failure] -- CMD ...`

Runs CMD (`python train.py ...`, `torchrun ...`, `accelerate launch ...`) with the capture
installed in every Python process it starts: the folder holding attn_doctor's bootstrap
`sitecustomize` is put first on PYTHONPATH and the options travel in ATTN_DOCTOR_CAPTURE.
When CMD ends, each call that raised is reported with its batch file and its diagnosis
(the first lines of `attn-doctor check`: the prediction, the first violation and its fix;
with --check, for every file written), run here through the package's extension, and this
command exits with CMD's status. In first-failure mode CUDA_LAUNCH_BLOCKING=1 is set (unless already set or
--no-launch-blocking is given) so that an asynchronous device error surfaces in the call
that caused it rather than in a later one.

This module doubles as `attn_doctor.capture(...)`: importing it must not hide the
function of the same name, so the module object is callable and forwards to it.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import types
from typing import List, Optional, Sequence

from ._session import MANIFEST, capture as _capture_function, check_command_line
from .diagnosis import summary


def command_after_dashes(parser: argparse.ArgumentParser, remainder: Sequence[str]) -> List[str]:
    """The wrapped command: what argparse.REMAINDER kept, less a leading `--`; a usage error
    when there is none."""
    command = list(remainder)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.error("give the command to run after --, e.g. -- python train.py")
    return command


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m attn_doctor.capture",
        description="Run a command with varlen-attention capture hooks installed and write "
                    "attn-doctor batch files for the calls chosen.")
    parser.add_argument("--out", default="attn-doctor-capture",
                        help="folder for batch files and manifest.jsonl (default: %(default)s)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--first-failure", action="store_true",
                       help="write the first call that raises (default)")
    which.add_argument("--every", action="store_true", help="write every call")
    which.add_argument("--call", type=int, metavar="N", help="write call number N (1-based)")
    parser.add_argument("--limit", type=int, metavar="N",
                        help="with --every: stop after N files per process")
    parser.add_argument("--threshold", type=int, default=None, metavar="ELEMENTS",
                        help="arrays with more elements go to .npy sidecars (default 4096)")
    parser.add_argument("--no-launch-blocking", action="store_true",
                        help="do not set CUDA_LAUNCH_BLOCKING=1 in first-failure mode")
    parser.add_argument("--check", action="store_true",
                        help="diagnose every file written, not only those of failing calls")
    parser.add_argument("--attn-doctor", default="attn-doctor", metavar="PROGRAM",
                        help="program named in the printed check command (default: %(default)s)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- followed by the command to run")
    args = parser.parse_args(list(argv))
    command = command_after_dashes(parser, args.command)
    if args.call is not None and args.call < 1:
        parser.error("--call N needs N >= 1")
    args.command = command
    return args


def bootstrap_environment(env: dict) -> dict:
    """`env` with attn_doctor's bootstrap `sitecustomize` (and this package) first on
    PYTHONPATH: every Python process started with it installs what ATTN_DOCTOR_CAPTURE and
    ATTN_DOCTOR_GUARD describe before the user's code runs."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bootstrap = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bootstrap")
    paths = [bootstrap, package_parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run_child(command: Sequence[str], env: dict) -> Optional[int]:
    """Runs the wrapped command and returns its exit status (128 + N when signal N ended it),
    or None, said on stderr, when it cannot start. Ctrl-C reaches the child through the process
    group: this process ignores it while it waits for the child to finish."""
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        print(f"attn-doctor: cannot run {command[0]!r}: {exc}", file=sys.stderr)
        return None
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    return status if status >= 0 else 128 - status


def _child_environment(args: argparse.Namespace, session: str) -> dict:
    env = bootstrap_environment(dict(os.environ))
    mode = "every" if args.every else "call" if args.call is not None else "first-failure"
    config = {"out": os.path.abspath(args.out), "mode": mode, "session": session,
              "announce": False, "check_command": args.attn_doctor}
    if args.call is not None:
        config["call"] = args.call
    if args.limit is not None:
        config["limit"] = args.limit
    if args.threshold is not None:
        config["threshold"] = args.threshold
    env["ATTN_DOCTOR_CAPTURE"] = json.dumps(config, sort_keys=True)
    if mode == "first-failure" and not args.no_launch_blocking:
        env.setdefault("CUDA_LAUNCH_BLOCKING", "1")
    return env


def _manifest_entries(out: str, session: str) -> List[dict]:
    path = os.path.join(out, MANIFEST)
    entries = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("session") == session:
                    entries.append(entry)
    except FileNotFoundError:
        pass
    return entries


def _report(args: argparse.Namespace, entries: List[dict], status: int) -> None:
    out = os.path.abspath(args.out)
    err = sys.stderr
    failures = [e for e in entries if e.get("failed")]
    if not entries:
        if args.call is not None:
            print(f"attn-doctor: the run made fewer than {args.call} attention calls; "
                  "nothing written", file=err)
        elif args.every:
            print("attn-doctor: the run made no hooked attention call; nothing written", file=err)
        else:
            print(f"attn-doctor: no attention call raised (exit status {status}); "
                  "nothing written", file=err)
        return
    for entry in failures:
        where = f", layer {entry['layer_idx']}" if "layer_idx" in entry else ""
        path = os.path.join(out, entry["file"])
        print(f"attn-doctor: call {entry['call']} into {entry['entry']}{where} raised "
              f"{entry.get('exception', '')}", file=err)
        print(f"attn-doctor: wrote {_shown(path)}; its diagnosis:", file=err)
        print(summary(_shown(path)), file=err)
        print(f"attn-doctor: the whole report: {check_command_line(args.attn_doctor, path)}", file=err)
    if args.check:
        for entry in entries:
            if entry.get("failed"):
                continue
            path = os.path.join(out, entry["file"])
            print(f"attn-doctor: call {entry['call']} into {entry['entry']}: {_shown(path)}", file=err)
            print(summary(_shown(path)), file=err)
    if not failures or len(entries) > len(failures):
        print(f"attn-doctor: wrote {len(entries)} batch file(s) into {_shown(out)} "
              f"(index: {MANIFEST}); check one with:\n"
              f"  {check_command_line(args.attn_doctor, os.path.join(out, entries[0]['file']))}",
              file=err)


def _shown(path: str) -> str:
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else path


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    session = f"{os.getpid()}-{time.time_ns()}"
    status = run_child(args.command, _child_environment(args, session))
    if status is None:
        return 127
    _report(args, _manifest_entries(os.path.abspath(args.out), session), status)
    return status


class _CallableModule(types.ModuleType):
    """`attn_doctor.capture(...)` keeps working after `import attn_doctor.capture`."""

    def __call__(self, *args, **kwargs):
        return _capture_function(*args, **kwargs)


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = _CallableModule
