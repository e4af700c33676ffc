#!/bin/bash
# The second launch as the first's programmatic dependent (launch_fwd), on top of run.sh's
# split test, in one device call from the repository root with scripts/stage-deps's prefix in
# .device/deps:   OUT=<dir> bash bench/results/fwd-bounds-split-h100-2026-11-27b/run-pdl.sh
# Builds the tree (sm_90 / sm_90a, with the one-launch forms), runs the GPU tests without the
# sweep, the two-launch comparison test five more times (the two launches now overlap) and the
# corpus on CUDA, then times the forward with the dependent launch ("pdl") and without it
# (ATTN_DOCTOR_NO_PDL=1, "serial") in alternating processes: bench_kernels.py --wgmma-ws
# (varlen, vs FA2) and profile_fwd.py --time (dense, vs cuDNN).
set -u
R=$(pwd); D=$R/.device/deps; B=/tmp/bp; t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu.txt
cudart=$(dirname $(command -v nvcc))/../lib64
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_CUDA_FLAGS=-DATTN_DOCTOR_FWD_ONE_LAUNCH" -DCMAKE_PREFIX_PATH=$D \
  -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 \
  -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
ninja -C $B -j 16 attn_doctor_tests attn-doctor attn_doctor_cuda attn_doctor_core > /tmp/build.log 2>&1 || { grep -B2 -A12 error /tmp/build.log | head -60; exit 1; }
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) \
  $(find $B -name libattn_doctor_cuda.a) -L$cudart -lcudart_static -ldl -lrt -lpthread || exit 1
say "built"
timeout 200 $B/tests/attn_doctor_tests "[cuda]" "~[cuda-sweep]" > $OUT/tests.log 2>&1; echo "tests rc=$?"; tail -2 $OUT/tests.log
say "tests done"
for i in 1 2 3 4 5; do
  timeout 40 $B/tests/attn_doctor_tests "cuda: the checked forward in two launches writes what it writes in one" 2>&1 | tail -2
done > $OUT/two-launch-repeat.log; grep -c "All tests passed" $OUT/two-launch-repeat.log
say "two-launch test x5 done"
timeout 80 $B/attn-doctor repro repro_cases --backend cuda > $OUT/corpus.log 2>&1; echo "corpus rc=$?"; tail -1 $OUT/corpus.log
say "corpus done"
export PYTHONPATH=$R/python PYTHONUNBUFFERED=1
for side in pdl serial; do
  env=""; [[ $side == serial ]] && env="ATTN_DOCTOR_NO_PDL=1"
  echo "== $side varlen" | tee -a $OUT/bench.log
  env $env timeout 100 python3 bench/gpu/bench_kernels.py --lib $B/libad_bench.so --tokens 16384 65536 --head-dims 64 128 \
    --heads 16 --reps 20 --wgmma-ws --skip-memory --json $OUT/varlen-$side.json 2>&1 | grep -v "UserWarning\|_warn_once" |
    tail -25 | tee -a $OUT/bench.log
  say "$side varlen timed"
done
for side in pdl serial pdl serial; do
  env=""; [[ $side == serial ]] && env="ATTN_DOCTOR_NO_PDL=1"
  echo "== $side dense" | tee -a $OUT/bench.log
  env $env timeout 70 python3 bench/results/fwd-ncu-h100-2026-11-27/profile_fwd.py --lib $B/libad_bench.so --time 20 --heads 16 2>&1 |
    grep -v "UserWarning\|_warn_once" | tee -a $OUT/bench.log
  say "$side dense timed"
done
