#!/bin/bash
# One device call, from the repository root with scripts/stage-deps's prefix in .device/deps:
#   OUT=<dir> bash bench/results/bwd-ws-tma-h100-2026-11-28/run.sh
# 1. bench/gpu/bwd_ws.sh: the default build ("after": the checked form's key blocks on the
#    warp-specialised kernel with TMA loads) against -DATTN_DOCTOR_BWD_WS_TMA=0 ("before": the
#    wgmma kernel, main's backward), the after build's backward GPU tests and training sweep,
#    dense (vs cuDNN, FA2) and varlen (vs FA2) at head dims 64 and 128.
# 2. the ops extension of the default build, then bench/gpu/attn_layer_profile.py (the training
#    step's attention function alone, with each kernel's time).
set -u
R=$(pwd); t0=$SECONDS
timeout 470 bash bench/gpu/bwd_ws.sh --deps .device/deps --head-dims "64 128" --tokens "16384 65536" \
  --tests '*backward*,cuda sweep: CUDA and CPU backends agree on the training sweep' --budget 330 \
  --before-flags -DATTN_DOCTOR_BWD_WS_TMA=0 --after-flags "" 2>&1 | grep -v "^[0-9.]* s: cuda"
echo "[$((SECONDS - t0)) s] bwd_ws done"
OUT=$OUT BUILD=/tmp/build-ops bash bench/gpu/ops_gpu.sh --build-only --deps $R/.device/deps > $OUT/ops-build.log 2>&1 || { tail -20 $OUT/ops-build.log; exit 1; }
echo "[$((SECONDS - t0)) s] ops built"
ATTN_DOCTOR_NATIVE_DIR=/tmp/build-ops/python/attn_doctor PYTHONPATH=$R/python:$R/bench/gpu PYTHONUNBUFFERED=1 \
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 100 \
  python3 bench/gpu/attn_layer_profile.py --out $OUT --variants attn_doctor,attn_doctor/norows,sdpa_cudnn 2>&1 |
  grep -v "Warning\|warn_once" | tee $OUT/profile.log | grep -v "^ .* x[0-9]  void at::\|Memset"
echo "[$((SECONDS - t0)) s] done"
# a device call brings back at most 8 files: everything in one archive
(cd $OUT && tar czf /tmp/all.tgz . && rm -rf ./* && mv /tmp/all.tgz .)
