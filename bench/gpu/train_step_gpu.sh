#!/usr/bin/env bash
# The 1B-class Llama training step (bench/gpu/train_step_gpu.py) on the accelerator machine, in
# one command: builds the extension with the CUDA kernels as bench/gpu/ops_gpu.sh does (its
# --build-only), then runs the benchmark with it.
#   bash bench/gpu/train_step_gpu.sh [--deps DIR] [train_step_gpu.py's arguments]
# Results go to $OUT (else bench/results/local): train-step.json, train-step.log, the profiles
# asked for, ops-build.log, gpu.txt.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/bench/results/local}
python=${PYTHON:-python3}
build=${BUILD:-/tmp/build-ops}
deps=()
if [[ ${1:-} == --deps ]]; then deps=(--deps "$2"); shift 2; fi
mkdir -p "$out"
OUT=$out BUILD=$build PYTHON=$python bash "$root/bench/gpu/ops_gpu.sh" --build-only "${deps[@]}" || exit 1
t=$SECONDS
ATTN_DOCTOR_NATIVE_DIR=$build/python/attn_doctor PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH} \
  PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True} \
  "$python" "$root/bench/gpu/train_step_gpu.py" --out "$out" "$@" 2>&1 | tee "$out/train-step.log"
status=${PIPESTATUS[0]}
echo "== train_step_gpu.py rc=$status in $((SECONDS - t)) s"
exit $status
