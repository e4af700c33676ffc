#!/bin/bash
# The listings sass_compare.py reads: per backward object of build-cuda, cuobjdump -res-usage
# and -sass into OUT/NAME.{res,sass}. Run once on a build of the base, once on this tree:
#   ninja -C build-cuda -j1 <the objects below>; bench/results/bwd-split-dedupe-2026-11-27/run.sh OUT
#   python3 bench/results/bwd-split-dedupe-2026-11-27/sass_compare.py BEFORE AFTER
# CUOBJDUMP: a cuobjdump that reads sm_80 / sm_90 / sm_90a objects (CUDA 12.4's and 12.8's do).
set -e
out=$1; mkdir -p "$out"
cuobjdump=${CUOBJDUMP:-cuobjdump}
cd "$(dirname "$0")/../../../build-cuda"
for o in CMakeFiles/attn_doctor_cuda.dir/kernels/varlen_attention_bwd_tc_*.cu.o \
         CMakeFiles/attn_doctor_cuda_sm90a.dir/kernels/sm90a/varlen_attention_bwd_wgmma_*.cu.o; do
  n=$(basename "$o" .cu.o)
  "$cuobjdump" -res-usage "$o" > "$out/$n.res"
  "$cuobjdump" -sass "$o" > "$out/$n.sass"
done
