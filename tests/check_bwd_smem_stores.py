#!/usr/bin/env python3
"""The wgmma backward's per-step shared-memory tile stores take one wavefront per phase.

The wgmma backward kernels write two tiles a step from registers: dSᵀ (4-byte stores), which
the dQ product reads, and dQ (8-byte stores of the m64nNk16 accumulator), which goes into
dq_accum from there. In the warp-specialised kernel the dQ tile has the tensor memory
accelerator's 128-byte swizzle (the bulk reductions read it), whose layout put rows r and r ^ 1
of a store's 16-lane phase on the same banks: two wavefronts where one holds the phase (ncu on
an H200: bench/results/bwd-dq-store-h200-2026-11-28, where the dSᵀ stores took their ideal).
tests/bwd_smem_stores.cu evaluates the kernels' own address functions on the host for both
tiles, both dQ layouts and both head dims.

    check_bwd_smem_stores.py --nvcc NVCC [--source-dir DIR]

Builds tests/bwd_smem_stores.cu with nvcc (a few seconds; no GPU needed) and runs it; fails with
its output when a phase takes more than one wavefront or a store misses or repeats an element.
"""
import argparse
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "bwd_smem_stores")
        cmd = [args.nvcc, "-std=c++17", "-O2", "-arch=sm_90a", "--expt-relaxed-constexpr",
               "-I" + os.path.join(src, "kernels"), "-I" + os.path.join(src, "lib"),
               os.path.join(src, "tests", "bwd_smem_stores.cu"), "-o", exe]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("nvcc failed:\n" + " ".join(cmd) + "\n" + r.stderr[-4000:])
        r = subprocess.run([exe], capture_output=True, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            sys.exit("bwd_smem_stores: %d\n%s" % (r.returncode, r.stderr[-2000:]))


if __name__ == "__main__":
    main()
