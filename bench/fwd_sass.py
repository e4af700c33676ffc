#!/usr/bin/env python3
"""The wgmma forward's SASS, per image: registers, stack, spills, R2UR, and the key loop.

Reads the sm_90a objects of the wgmma forward (kernels/sm90a/varlen_attention_wgmma_{bf16,fp16}.cu,
and the head dim 192 ones where they are built, in a CUDA build directory) with cuobjdump and prints, per kernel image (element type x
head dim x checked/unchecked), a markdown table row:

- registers and stack frame (cuobjdump -res-usage),
- local loads / stores in the whole image (LDL / STL: spills and the stack frame's uses),
- R2UR in the whole image,
- the key loops: each backward branch whose body holds wgmma instructions (HGMMA) is a loop
  over key tiles; per loop its instruction count, HGMMA, R2UR, LDL + STL and LDGSTS. The
  checked form has two copies of the loop (every key row in bounds: the unchecked loads; or
  the checked loader), the unchecked form two identical copies (see the kernel's comment);
  the hot loop is the smallest (the in-bounds copy). The checked form runs in two launches:
  its first launch's image has the unchecked form's loop, its second (the fallback, the
  checked body in a persistent loop) the two copies.

Usage:
  python3 bench/fwd_sass.py --build build-cuda [--cuobjdump PATH] [--label TEXT]
  python3 bench/fwd_sass.py --self-test      # the parser on a built-in listing (tests/CMakeLists.txt)

cuobjdump: --cuobjdump, else $CUOBJDUMP, else cuobjdump on PATH, else the CUDA toolkit's.
No GPU needed.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

OBJ_DIR = "CMakeFiles/attn_doctor_cuda_sm90a.dir/kernels/sm90a"
FILES = ["varlen_attention_wgmma_bf16.cu.o", "varlen_attention_wgmma_fp16.cu.o"]
OPTIONAL = ["varlen_attention_wgmma_d192_bf16.cu.o", "varlen_attention_wgmma_d192_fp16.cu.o"]  # read where built
# varlen_fwd_wgmma_kernel<T, D, BN, MinBlocks, PSmem, Checked, InteriorLoads> (Checked: the
# checked form's first launch), varlen_fwd_wgmma_fallback_kernel<T, D, BN, MinBlocks, PSmem,
# InteriorLoads> (its second launch) and, in a build with ATTN_DOCTOR_FWD_ONE_LAUNCH,
# varlen_fwd_wgmma_one_launch_kernel<...> (the checked form in one launch)
KERNEL_RE = re.compile(
    r"varlen_fwd_wgmma_(?P<kind>kernel|fallback_kernel|one_launch_kernel)I(?P<t>13__nv_bfloat16|6__half)"
    r"Li(?P<d>\d+)ELi(?P<bn>\d+)ELi(?P<mb>\d+)ELb(?P<psmem>[01])E(?:Lb(?P<checked>[01])E)?Lb(?P<interior>[01])E")
FORMS = {("kernel", "0"): "unchecked", ("kernel", "1"): "checked, first launch",
         ("fallback_kernel", None): "checked, second launch", ("one_launch_kernel", None): "checked, one launch"}
INSTR_RE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRA_RE = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")


def find_cuobjdump(arg):
    for c in [arg, os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("fwd_sass.py: no cuobjdump (give --cuobjdump PATH or set CUOBJDUMP)")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"fwd_sass.py: {' '.join(cmd)} failed: {r.stderr.strip()}")
    return r.stdout + r.stderr


def opcode(text):
    t = text.strip()
    if t.startswith("@"):
        t = t.split(None, 1)[1]
    return t.split()[0].split(".")[0]


def parse_sass(text):
    """{function name: [(address, instruction text)]}"""
    funcs, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = INSTR_RE.match(line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2)))
    return funcs


def parse_res(text):
    res, name = {}, None
    for line in text.splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"REG:(\d+) STACK:(\d+)", line)
        if m and name:
            res[name] = (int(m.group(1)), int(m.group(2)))
            name = None
    return res


def key_loops(ins):
    idx = {a: i for i, (a, _) in enumerate(ins)}
    loops = []
    for i, (a, t) in enumerate(ins):
        if opcode(t) != "BRA":
            continue
        m = BRA_RE.search(t)
        if not m:
            continue
        tgt = int(m.group(1), 16)
        if tgt >= a or tgt not in idx:
            continue
        body = ins[idx[tgt]:i + 1]
        c = collections.Counter(opcode(x) for _, x in body)
        if c["HGMMA"] == 0:
            continue
        loops.append((len(body), c))
    # nested back edges (none expected) would count twice: keep the outermost per start
    return sorted(loops, key=lambda l: l[0])


# A cuobjdump listing in miniature (the format's lines, made-up code): a loop with two HGMMA
# and an R2UR in front of the second, an outer loop around it with a local store, a local load
# before both.
SELF_TEST_SASS = """
		Function : _ZN2ad4kern4attn23varlen_fwd_wgmma_kernelI13__nv_bfloat16Li128ELi128ELi1ELb0ELb1ELb1EEEvNS0_15VarlenFwdParamsE
        /*0000*/                   LDL R2, [R1+0x8] ;                                /* 0x0000080001027983 */
        /*0010*/                   UMOV UR4, 0x1 ;                                   /* 0x0000000100047882 */
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT ; /* 0x0 */
        /*0030*/                   R2UR UR9, R3 ;                                    /* 0x0 */
        /*0040*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;   /* 0x0 */
        /*0050*/               @P0 BRA 0x20 ;                                        /* 0x0 */
        /*0060*/                   STL [R1+0x8], R2 ;                                /* 0x0 */
        /*0070*/               @P1 BRA 0x10 ;                                        /* 0x0 */
        /*0080*/                   EXIT ;                                            /* 0x0 */
"""


def self_test():
    funcs = parse_sass(SELF_TEST_SASS)
    assert len(funcs) == 1, funcs
    (name, ins), = funcs.items()
    assert KERNEL_RE.search(name)["checked"] == "1" and KERNEL_RE.search(name)["d"] == "128"
    fb = KERNEL_RE.search("_ZN2ad4kern4attn32varlen_fwd_wgmma_fallback_kernelI6__halfLi64ELi64ELi2ELb0ELb1EEEvNS0_15VarlenFwdParamsE")
    assert (fb["kind"], fb["checked"], fb["d"], fb["interior"]) == ("fallback_kernel", None, "64", "1"), fb.groupdict()
    assert len(ins) == 9 and ins[5] == (0x50, "@P0 BRA 0x20"), ins
    c = collections.Counter(opcode(t) for _, t in ins)
    assert (c["R2UR"], c["LDL"], c["STL"], c["HGMMA"]) == (1, 1, 1, 2), c
    loops = key_loops(ins)  # both back edges hold HGMMA: the inner loop first
    assert [n for n, _ in loops] == [4, 7], loops
    assert loops[0][1]["R2UR"] == 1 and loops[0][1]["LDL"] + loops[0][1]["STL"] == 0, loops
    assert loops[1][1]["STL"] == 1, loops
    res = parse_res(" Function _Zfoo:\n  REG:255 STACK:208 SHARED:1024 LOCAL:0\n")
    assert res == {"_Zfoo": (255, 208)}, res
    print("fwd_sass.py self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", help="CUDA build directory (objects under %s)" % OBJ_DIR)
    ap.add_argument("--cuobjdump")
    ap.add_argument("--label", default="")
    ap.add_argument("--self-test", action="store_true", help="check the parser on a built-in listing (no CUDA)")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return
    if not a.build:
        ap.error("--build is required")
    cu = find_cuobjdump(a.cuobjdump)
    rows = []
    for f in FILES + OPTIONAL:
        obj = os.path.join(a.build, OBJ_DIR, f)
        if f in OPTIONAL and not os.path.isfile(obj):
            continue
        if not os.path.isfile(obj):
            sys.exit(f"fwd_sass.py: {obj} not built (ninja -C {a.build} {OBJ_DIR}/{f})")
        funcs = parse_sass(run([cu, "-sass", obj]))
        res = parse_res(run([cu, "-res-usage", obj]))
        for name, ins in funcs.items():
            m = KERNEL_RE.search(name)
            if not m:
                continue
            c = collections.Counter(opcode(t) for _, t in ins)
            loops = key_loops(ins)
            reg, stack = res.get(name, (-1, -1))
            rows.append({
                "type": "bf16" if "bfloat" in m["t"] else "fp16",
                "d": int(m["d"]), "bn": int(m["bn"]), "psmem": m["psmem"] == "1",
                "form": FORMS[(m["kind"], m["checked"])], "reg": reg, "stack": stack,
                "instr": len(ins), "r2ur": c["R2UR"], "ldl": c["LDL"], "stl": c["STL"], "loops": loops,
            })
    rows.sort(key=lambda r: (r["psmem"], r["d"], r["type"], list(FORMS.values()).index(r["form"])))
    if a.label:
        print(f"{a.label}\n")
    print("| image | regs | stack | instr | R2UR | LDL / STL | hot loop: instr | HGMMA | R2UR | LDL + STL | LDGSTS | other loop: instr | R2UR | LDL + STL |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        name = f"d{r['d']} {r['type']} {r['form']}" + (" (P in smem)" if r["psmem"] else "")
        cells = [name, r["reg"], r["stack"], r["instr"], r["r2ur"], f"{r['ldl']} / {r['stl']}"]
        if r["loops"]:
            n, c = r["loops"][0]
            cells += [n, c["HGMMA"], c["R2UR"], c["LDL"] + c["STL"], c["LDGSTS"]]
        else:
            cells += ["-"] * 5
        if len(r["loops"]) > 1:
            n, c = r["loops"][-1]
            cells += [n, c["R2UR"], c["LDL"] + c["STL"]]
        else:
            cells += ["-"] * 3
        print("| " + " | ".join(str(x) for x in cells) + " |")


if __name__ == "__main__":
    main()
