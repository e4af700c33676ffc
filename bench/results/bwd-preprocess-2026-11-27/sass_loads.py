#!/usr/bin/env python3
"""Counts, per preprocess / dq-conversion kernel in a `cuobjdump -sass` listing, the global
loads (LDG) and 128-bit loads (LDG.E.128) issued before the kernel's first shuffle (SHFL) and
before its first global store (STG), and the totals: how many loads a thread has in flight
before it must wait for one, and the most 128-bit loads between two shuffles or stores."""
import re
import sys

text = open(sys.argv[1]).read()
for m in re.finditer(r"Function : (\S+)\n(.*?)(?=\n\s*Function : |\Z)", text, re.S):
    name, body = m.group(1), m.group(2)
    if "preprocess" not in name and "convert_dq" not in name:
        continue
    ins = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", body)

    def before(stop):
        out = {"LDG": 0, "LDG128": 0}
        for i in ins:
            if i.startswith(stop):
                break
            if i.startswith("LDG"):
                out["LDG"] += 1
                out["LDG128"] += ".128" in i
        return out

    kind = ("checked" if "Lb1E" in name else "unchecked") + " " + ("bf16" if "bfloat16" in name else "fp16")
    step = "preprocess" if "preprocess" in name else "convert_dq"
    tot = sum(i.startswith("LDG") for i in ins)
    tot128 = sum(i.startswith("LDG") and ".128" in i for i in ins)
    s, g = before("SHFL"), before("STG")
    # the most 128-bit loads in a stretch of the listing with no shuffle or global store in it
    run = best = 0
    for i in ins:
        if i.startswith("SHFL") or i.startswith("STG"):
            run = 0
        elif i.startswith("LDG") and ".128" in i:
            run += 1
            best = max(best, run)
    print(f"{step:10} {kind:15} instr {len(ins):5}  LDG {tot:2} (.128 {tot128:2})  "
          f"before 1st SHFL: LDG {s['LDG']:2} (.128 {s['LDG128']:2})  before 1st STG: LDG {g['LDG']:2} (.128 {g['LDG128']:2})  most LDG.128 between SHFL/STG: {best}")
