#!/bin/bash
# The tree's checks on the H100 in one device call, from the repository root with
# scripts/stage-deps's prefix in .device/deps:
#   OUT=<dir> bash bench/results/bwd-ws-tma-h100-2026-11-28/lane.sh
# scripts/gpu-check --memcheck-only (build sm_80 / sm_90 / sm_90a, ctest with the GPU tests,
# compute-sanitizer memcheck of the GPU tests and of the repro corpus on CUDA), then
# bench/gpu/ops_gpu.sh --no-tests (the ops on the GPU: row counters and their readout, CUDA
# graph, torch.compile, per-call cost).
set -u
R=$(pwd); D=$R/.device/deps; G=$R/build-gpu; t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
timeout 420 scripts/gpu-check --deps $D --out /tmp/lane-b --build $G --jobs 16 --no-bench --no-ncu --memcheck-only \
  > /tmp/lane-b.log 2>&1
say "gpu-check rc=$?"
cp /tmp/lane-b/gpu-check.md $OUT/gpu-check.md 2>/dev/null
cp /tmp/lane-b/details.log $OUT/details.log 2>/dev/null
grep '^|' /tmp/lane-b/gpu-check.md | cut -c1-300
tail -c 1200 /tmp/lane-b.log
export PYTHONPATH=$R/python PYTHONUNBUFFERED=1
OUT=$OUT timeout 150 bash bench/gpu/ops_gpu.sh --deps $D --no-tests > $OUT/ops.log 2>&1; say "ops rc=$?"
tail -25 $OUT/ops.log
