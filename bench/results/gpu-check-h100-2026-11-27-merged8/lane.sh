#!/bin/bash
# The merged tree on the H100 in three device calls on one warm machine, the build kept in
# build-gpu between them. From the repository root with scripts/stage-deps's prefix in
# .device/deps:
#   PART=a OUT=<dir> bash bench/results/gpu-check-h100-2026-11-27-merged8/lane.sh  # gpu-check without memcheck
#   PART=t OUT=<dir> bash ...                                                      # timings, the training step
#   PART=b OUT=<dir> bash ...                                                      # memcheck, the ops on the GPU
# a: scripts/gpu-check --no-bench --no-ncu --no-memcheck (build sm_80 / sm_90 / sm_90a with the
#    one-launch forms, ctest, SASS census, CUDA vs CPU sweeps, corpus on CUDA, --raw).
# t: the two-launch comparison test three more times (its launches overlap now); the forward with
#    the second launch as the first's programmatic dependent and without it (ATTN_DOCTOR_NO_PDL=1)
#    in alternating processes: dense d128 vs cuDNN (profile_fwd.py --time), varlen vs FA2
#    (bench_kernels.py --wgmma-ws); the backward dense vs cuDNN and FA2 (bench_backward.py
#    --dense); the training step (train_step_gpu.sh).
# b: scripts/gpu-check --memcheck-only, then bench/gpu/ops_gpu.sh --no-tests.
set -u
R=$(pwd); D=$R/.device/deps; G=$R/build-gpu; t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
export ATTN_DOCTOR_COMMIT=${COMMIT:-unknown}
case $PART in
a|b)
  flag=--no-memcheck; [[ $PART == b ]] && flag=--memcheck-only
  timeout ${LIMIT:-560} scripts/gpu-check --deps $D --out /tmp/lane-$PART --build $G --jobs 16 --no-bench --no-ncu $flag \
    > /tmp/lane-$PART.log 2>&1
  say "gpu-check part $PART rc=$?"
  cp /tmp/lane-$PART/gpu-check.md $OUT/gpu-check-$PART.md 2>/dev/null
  cp /tmp/lane-$PART/details.log $OUT/details-$PART.log 2>/dev/null
  grep '^|' /tmp/lane-$PART/gpu-check.md | cut -c1-300
  tail -c 1500 /tmp/lane-$PART.log
  if [[ $PART == b ]]; then
    export PYTHONPATH=$R/python PYTHONUNBUFFERED=1
    OUT=$OUT timeout 200 bash bench/gpu/ops_gpu.sh --deps $D --no-tests > /tmp/ops.log 2>&1; say "ops rc=$?"
    tail -25 /tmp/ops.log
  fi ;;
t)
  cudart=$(dirname $(command -v nvcc))/../lib64
  g++ -std=c++20 -O2 -shared -fPIC -o /tmp/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart/../include \
    -Wl,--no-undefined $(find $G -name libattn_doctor_cuda.a) $(find $G -name libattn_doctor_core.a) \
    $(find $G -name libattn_doctor_cuda.a) -L$cudart -lcudart_static -ldl -lrt -lpthread || exit 1
  L=/tmp/libad_bench.so
  for i in 1 2 3; do
    timeout 40 $G/tests/attn_doctor_tests "cuda: the checked forward in two launches writes what it writes in one" 2>&1 | tail -1
  done | tee $OUT/two-launch-repeat.log
  say "two-launch x3"
  export PYTHONPATH=$R/python PYTHONUNBUFFERED=1
  for side in pdl serial pdl serial; do
    env=""; [[ $side == serial ]] && env="ATTN_DOCTOR_NO_PDL=1"
    echo "== $side dense" >> $OUT/fwd.log
    env $env timeout 60 python3 bench/results/fwd-ncu-h100-2026-11-27/profile_fwd.py --lib $L --time 20 --heads 16 2>&1 |
      grep -v "UserWarning\|_warn_once\|timeline\|rel err" >> $OUT/fwd.log
  done
  say "dense forward timed"
  for side in pdl serial; do
    env=""; [[ $side == serial ]] && env="ATTN_DOCTOR_NO_PDL=1"
    echo "== $side varlen" >> $OUT/fwd.log
    env $env timeout 80 python3 bench/gpu/bench_kernels.py --lib $L --tokens 16384 65536 --head-dims 64 128 --heads 16 \
      --reps 20 --wgmma-ws --skip-memory --json $OUT/fwd-varlen-$side.json 2>&1 | grep "^attn\|wgmma kernel\|VERIF" >> $OUT/fwd.log
  done
  say "varlen forward timed"
  grep -v "^$" $OUT/fwd.log | cut -c1-260
  timeout 90 python3 bench/gpu/bench_backward.py --lib $L --dense --head-dims 64 128 --reps 10 --json $OUT/bwd-dense.json 2>&1 |
    grep -E '^(dense|VERIF|all|SOME|Traceback|cuDNN)' | tee $OUT/bwd.log
  say "backward timed"
  OUT=$OUT timeout 250 bash bench/gpu/train_step_gpu.sh --deps $D --order 64:16384,128:16384 --budget 150 > /tmp/train.log 2>&1
  say "train step rc=$?"
  tail -25 /tmp/train.log ;;
esac
