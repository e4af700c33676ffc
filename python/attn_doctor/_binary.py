"""Where the attn-doctor binary is.

A wheel carries it in its scripts folder, as the cmake and ninja wheels carry theirs: pip
puts it beside the environment's `python` (`bin/` of a venv, `~/.local/bin` for a user
install, `DIR/bin` for `pip install --target DIR`). Looked up in that order, after
ATTN_DOCTOR_BINARY, then on PATH, then in a source checkout's build/ folder.
"""
from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from typing import List, Optional

NAME = "attn-doctor" + (sysconfig.get_config_var("EXE") or "")
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def candidates() -> List[str]:
    """Every place looked at, in order (the error message lists them)."""
    places = []
    for scheme in (None, f"{os.name}_user"):
        try:
            scripts = sysconfig.get_path("scripts") if scheme is None else sysconfig.get_path("scripts", scheme)
        except KeyError:
            continue
        places.append(os.path.join(scripts, NAME))
    places.append(os.path.join(os.path.dirname(sys.executable), NAME))
    places.append(os.path.join(_PACKAGE_PARENT, "bin", NAME))          # pip install --target
    on_path = shutil.which(NAME)
    if on_path:
        places.append(on_path)
    places.append(os.path.join(os.path.dirname(_PACKAGE_PARENT), "build", NAME))  # source checkout
    seen, unique = set(), []
    for p in places:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    return unique


def find() -> Optional[str]:
    """Path of the attn-doctor binary, or None."""
    given = os.environ.get("ATTN_DOCTOR_BINARY")
    if given:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    for path in candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def not_found_message() -> str:
    given = os.environ.get("ATTN_DOCTOR_BINARY")
    if given:
        return f"ATTN_DOCTOR_BINARY={given} is not an executable file"
    return ("the attn-doctor binary was not found (looked at " + ", ".join(candidates())
            + "); install the package with `pip install .` from the attn-doctor repository, "
            "or set ATTN_DOCTOR_BINARY")
