"""`python -m attn_doctor ARGS...` runs the attn-doctor binary with ARGS (the one the wheel
installed beside this Python), so the tool works wherever the package is importable: same
output, same exit codes.

`python -m attn_doctor env` asks the binary about this Python (ATTN_DOCTOR_ENV_PYTHON); with
no binary found it still reports the Python side (attn_doctor/_env.py), and exits 3."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Optional, Sequence

from . import _binary


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    binary = _binary.find()
    env_command = bool(args) and args[0] == "env"
    if binary is None:
        if env_command:
            return _env_without_binary(args[1:])
        print(f"attn-doctor: cannot run: {_binary.not_found_message()}", file=sys.stderr)
        return 3
    environment = None
    if env_command:  # the binary reports on this interpreter, not the first python3 it finds
        environment = dict(os.environ, ATTN_DOCTOR_ENV_PYTHON=sys.executable)
    if argv is None and os.name == "posix":
        sys.stdout.flush()
        sys.stderr.flush()
        # signals and the exit code are the binary's own
        if environment is None:
            os.execv(binary, [binary] + args)
        os.execve(binary, [binary] + args, environment)
    return subprocess.call([binary] + args, env=environment)


def _env_without_binary(args) -> int:
    from . import _env
    info = _env.collect()
    why = _binary.not_found_message()
    if "json" in args or "--format=json" in args:
        print(json.dumps({"binary": None, "binary_error": why, "python": info}, indent=2))
    else:
        print(f"binary: not found ({why})")
        print(_env.render(info))
    return 3


if __name__ == "__main__":
    sys.exit(main())
