#!/usr/bin/env python3
"""The include layering of lib/ (docs/layering.md): every `#include "FOLDER/..."` in a file of
lib/FOLDER_A points to the same folder or to one on a lower floor. Exit 1 naming each include
that climbs, or that names a folder the table does not place.

    python3 tests/check_layering.py [--root DIR]
"""
import argparse
import re
import sys
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
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/', re.M)


def climbs(root):
    found = []
    for path in sorted((root / "lib").rglob("*")):
        if path.suffix not in (".hpp", ".cpp", ".inc", ".cuh", ".h"):
            continue
        folder = path.relative_to(root / "lib").parts[0]
        if folder not in FLOORS:
            found.append(f"{path.relative_to(root)}: lib/{folder}/ has no floor in tests/check_layering.py")
            continue
        for m in INCLUDE.finditer(path.read_text(errors="replace")):
            dep = m.group(1)
            line = path.read_text(errors="replace")[: m.start()].count("\n") + 1
            if dep not in FLOORS:
                found.append(f"{path.relative_to(root)}:{line}: includes {dep}/, which has no floor")
            elif dep != folder and FLOORS[dep] >= FLOORS[folder]:
                found.append(f"{path.relative_to(root)}:{line}: {folder}/ (floor {FLOORS[folder]}) includes "
                             f"{dep}/ (floor {FLOORS[dep]}): an include may only point down")
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    args = ap.parse_args()
    found = climbs(Path(args.root))
    for f in found:
        print(f)
    if found:
        print(f"check_layering: {len(found)} include(s) climb (docs/layering.md)")
        return 1
    print("check_layering: every include of lib/ points down or stays in its folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
