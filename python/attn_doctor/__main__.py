"""`python -m attn_doctor ARGS...` runs the attn-doctor binary with ARGS (the one the wheel
installed beside this Python), so the tool works wherever the package is importable: same
output, same exit codes."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Optional, Sequence

from . import _binary


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    binary = _binary.find()
    if binary is None:
        print(f"attn-doctor: cannot run: {_binary.not_found_message()}", file=sys.stderr)
        return 3
    if argv is None and os.name == "posix":
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(binary, [binary] + args)  # signals and the exit code are the binary's own
    return subprocess.call([binary] + args)


if __name__ == "__main__":
    sys.exit(main())
