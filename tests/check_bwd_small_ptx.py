#!/usr/bin/env python3
"""The backward's small launches (kernels/varlen_attention_bwd_small.cuh: the preprocess, the dq
conversion, the group sum) use no local memory in their PTX.

A kernel that hands its params (or a struct built from them) by reference to a __noinline__
function gets a copy of the 608-byte VarlenBwdParams in every thread's local memory unless the
params are __grid_constant__; the checked preprocess had that copy, made by every CTA at entry
(464 MB of local stores a call at 16k tokens x 32 heads on an H100:
bench/results/bwd-launches-h100-2026-11-27). The copy shows in the PTX as a local frame
(__local_depot) with ld.local / st.local; the record calls' own arguments go through .param
space, so a healthy kernel has neither.

    check_bwd_small_ptx.py --nvcc NVCC [--source-dir DIR] [--arch sm_90]

Compiles kernels/varlen_attention_bwd.cu to PTX (a few seconds) and fails naming each small
kernel whose body has a local frame or a local load / store, or when none is found.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

KERNELS = ("varlen_bwd_preprocess_kernel", "varlen_bwd_convert_dq_kernel", "varlen_bwd_group_sum")


def entries(ptx):
    """{mangled name: body} of every .entry in a PTX listing."""
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(", ptx):
        end = ptx.find("\n}\n", m.end())
        out[m.group(1)] = ptx[m.end():end if end >= 0 else len(ptx)]
    return out


def local_use(body):
    """The local-memory constructs in one kernel body (name: count)."""
    found = {k: len(re.findall(p, body)) for k, p in
             (("__local_depot", r"__local_depot"), ("ld.local", r"\bld\.local"), ("st.local", r"\bst\.local"))}
    return {k: n for k, n in found.items() if n}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    with tempfile.TemporaryDirectory() as tmp:
        ptx_path = os.path.join(tmp, "bwd.ptx")
        cmd = [args.nvcc, "-DATTN_DOCTOR_WITH_CUDA=1", "-I" + os.path.join(src, "kernels"), "-I" + os.path.join(src, "lib"),
               "-O3", "-DNDEBUG", "-arch=" + args.arch, "--expt-relaxed-constexpr", "-std=c++17", "-x", "cu", "-ptx",
               os.path.join(src, "kernels", "varlen_attention_bwd.cu"), "-o", ptx_path]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("nvcc failed:\n" + " ".join(cmd) + "\n" + r.stderr[-4000:])
        with open(ptx_path) as f:
            ptx = f.read()
    small = {name: body for name, body in entries(ptx).items() if any(k in name for k in KERNELS)}
    if not small:
        sys.exit("no small-launch kernel (%s) in the PTX" % ", ".join(KERNELS))
    bad = {name: use for name, use in ((n, local_use(b)) for n, b in small.items()) if use}
    for name in sorted(small):
        print(("LOCAL " + str(bad[name]) if name in bad else "ok   ") + " " + name)
    if bad:
        sys.exit("%d of %d small-launch kernels use local memory" % (len(bad), len(small)))
    print("%d small-launch kernels, no local memory" % len(small))


if __name__ == "__main__":
    main()
