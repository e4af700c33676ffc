#!/bin/bash
# One device call, from the repository root with scripts/stage-deps's prefix in .device/deps:
#   OUT=<dir> bash bench/results/attn-layer-h100-2026-11-28/run.sh
set -u
R=$(pwd); t0=$SECONDS
OUT=$OUT BUILD=/tmp/build-ops bash bench/gpu/ops_gpu.sh --build-only --deps $R/.device/deps > $OUT/ops-build.log 2>&1 || { tail -30 $OUT/ops-build.log; exit 1; }
echo "[$((SECONDS - t0)) s] built"
ATTN_DOCTOR_NATIVE_DIR=/tmp/build-ops/python/attn_doctor PYTHONPATH=$R/python:$R/bench/gpu PYTHONUNBUFFERED=1 \
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${LIMIT:-300} \
  python3 bench/gpu/attn_layer_profile.py --out $OUT "$@" 2>&1 | grep -v Warning | tee $OUT/profile.log
echo "[$((SECONDS - t0)) s] done"
