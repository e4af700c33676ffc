#!/usr/bin/env python3
"""The include layering of lib/ (docs/layering.md): every `#include "FOLDER/..."` in a file of
lib/FOLDER_A points to the same folder or to one on a lower floor, and inside lib/exec/ every
`#include "exec/ROOM/..."` points to the same room or one on a lower floor of exec's rooms.
Exit 1 naming each include that climbs, or that names a folder or room the tables do not place.

    python3 tests/check_layering.py [--root DIR]
    python3 tests/check_layering.py --self-test   # the check fails on each kind of climb
"""
import argparse
import re
import sys
import tempfile
from pathlib import Path

# floor of each folder: lib/'s folders and kernels/contract (the execution contract the kernels
# and the CPU twin share); a folder may include its own floor's folder and those below
FLOORS = {
    "util": 0, "vocab": 0, "contract": 0,
    "batch": 1,
    "predict": 2,
    "convert": 3,
    "check": 4,
    "exec": 5,
    "doctor": 6,
    "render": 7,
    "html": 8, "repro": 8,
}
# the rooms of lib/exec/ (a sub-folder, or one of the two headers at its root) in their order:
# a room may include its own files and those of the rooms below it, never one above
EXEC_ROOMS = {
    "exec.hpp": 0,     # the face to the rest of lib/: ExecOptions, Backend, ExecResult
    "plan": 1,         # the execution plan
    "engine.hpp": 2,   # the engine interface and its observations
    "reference": 3,    # the fp64 references, the dq_accum offsets
    "run": 4,          # the stage driver, observation -> violation
    "cpu": 5,          # the CPU twins, the CPU engine and backend
    "cuda": 6,         # the CUDA backend's host side
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/([^"]*)"', re.M)
SOURCES = (".hpp", ".cpp", ".inc", ".cuh", ".h")


def exec_room(rest):
    """The room of a path inside lib/exec/ ("plan/plan.hpp" -> "plan", "engine.hpp" -> itself)."""
    return rest.split("/", 1)[0]


def climbs(root):
    found = []
    for path in sorted((root / "lib").rglob("*")):
        if path.suffix not in SOURCES:
            continue
        rel = path.relative_to(root / "lib")
        folder = rel.parts[0]
        name = path.relative_to(root)
        if folder not in FLOORS:
            found.append(f"{name}: lib/{folder}/ has no floor in tests/check_layering.py")
            continue
        room = exec_room("/".join(rel.parts[1:])) if folder == "exec" else None
        if room is not None and room not in EXEC_ROOMS:
            found.append(f"{name}: lib/exec/{room} has no room in tests/check_layering.py (EXEC_ROOMS)")
            room = None
        text = path.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            dep, rest = m.group(1), m.group(2)
            line = text[: m.start()].count("\n") + 1
            if dep not in FLOORS:
                found.append(f"{name}:{line}: includes {dep}/, which has no floor")
            elif dep != folder and FLOORS[dep] >= FLOORS[folder]:
                found.append(f"{name}:{line}: {folder}/ (floor {FLOORS[folder]}) includes "
                             f"{dep}/ (floor {FLOORS[dep]}): an include may only point down")
            elif dep == "exec" and folder == "exec" and room is not None:
                to = exec_room(rest)
                if to not in EXEC_ROOMS:
                    found.append(f"{name}:{line}: includes exec/{rest}, whose room exec/{to} has no place in EXEC_ROOMS")
                elif to != room and EXEC_ROOMS[to] >= EXEC_ROOMS[room]:
                    found.append(f"{name}:{line}: exec/{room} (room {EXEC_ROOMS[room]}) includes exec/{to} "
                                 f"(room {EXEC_ROOMS[to]}): inside exec/ an include may only point down")
    return found


def self_test():
    """A small tree with one include of each kind: the climbing ones, and only those, are found."""
    files = {
        "lib/render/ok.cpp": '#include "doctor/diagnosis.hpp"\n',          # down a floor
        "lib/check/up.cpp": '#include "render/render.hpp"\n',               # climbs a floor
        "lib/exec/run/ok.cpp": '#include "exec/reference/reference.hpp"\n#include "exec/engine.hpp"\n',
        "lib/exec/run/up.cpp": '#include "exec/cpu/cpu_kernels.hpp"\n',     # climbs a room
        "lib/exec/plan/up.hpp": '#include "exec/engine.hpp"\n',             # climbs to a root header
        "lib/exec/engine.hpp": '#include "exec/plan/plan.hpp"\n',
        "lib/exec/misc/x.cpp": '#include "exec/exec.hpp"\n',                # a room with no place
    }
    with tempfile.TemporaryDirectory() as d:
        for rel, text in files.items():
            (Path(d) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(d) / rel).write_text(text)
        found = climbs(Path(d))
    expect = ["lib/check/up.cpp:1:", "lib/exec/misc/x.cpp:", "lib/exec/plan/up.hpp:1:", "lib/exec/run/up.cpp:1:"]
    got = sorted(f.split(" ", 1)[0] for f in found)
    for f in found:
        print(f)
    if got != expect:
        print(f"check_layering --self-test: expected climbs at {expect}, found {got}")
        return 1
    print("check_layering --self-test: each climbing include found, nothing else")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    found = climbs(Path(args.root))
    for f in found:
        print(f)
    if found:
        print(f"check_layering: {len(found)} include(s) climb (docs/layering.md)")
        return 1
    print("check_layering: every include of lib/ points down or stays in its folder (and in lib/exec/, its room)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
