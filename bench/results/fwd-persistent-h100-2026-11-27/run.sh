#!/bin/bash
# One device call: build (sm_90 + sm_90a, 16 jobs), the warp-specialised kernel's GPU test, the
# dense (against cuDNN and FA2) and varlen (against FA2) benchmarks at head dim 128 with the
# default (the persistent form) beside the warp-specialised kernel one CTA a tile and the wgmma
# kernel, the forward GPU tests, the CUDA/CPU sweep (as far as the call's time allows: the
# stages print as they finish).
# Run from a copy of the tree with the build dependencies in deps/: OUT=<dir> bash run.sh
set -u
R=$(pwd); D=$R/deps; O=${OUT:-/tmp/out}; B=/tmp/b-h45
t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [[ ! -f $B/build.ninja ]]; then
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D \
  -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 \
  -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > "$O/cmake.log" 2>&1 || { tail -30 $O/cmake.log; exit 1; }
fi
if ! ninja -C $B -j 16 attn_doctor_tests > "$O/build.log" 2>&1; then grep -B2 -A12 "error" "$O/build.log" | head -80; exit 1; fi
say "built"
timeout 30 $B/tests/attn_doctor_tests "cuda: the warp-specialised wgmma forward matches fp64 attention" > $O/test-ws.log 2>&1; rc=$?; echo "ws test rc=$rc"; grep -B3 -A10 FAILED $O/test-ws.log | head -40; tail -3 $O/test-ws.log
[[ $rc == 124 ]] && exit 1
say "ws test"
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart_dir/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) $(find $B -name libattn_doctor_cuda.a) \
  -L$cudart_dir -lcudart_static -ldl -lrt -lpthread > "$O/capi.log" 2>&1 || { cat "$O/capi.log"; exit 1; }
say "capi"
PYTHONUNBUFFERED=1 timeout 40 python3 bench/gpu/bench_dense_cudnn.py --lib $B/libad_bench.so --wgmma-ws --head-dims 128 --reps 20 --warmup 3 \
  --json "$O/bench-dense.json" --md "$O/bench-dense.md" > "$O/bench-dense.log" 2>&1; echo "dense rc=$?"
grep -v "^ *$" "$O/bench-dense.log" | tail -14
say "dense"
PYTHONUNBUFFERED=1 timeout 40 python3 bench/gpu/bench_kernels.py --lib $B/libad_bench.so --wgmma-ws --skip-memory --head-dims 128 \
  --tokens 16384 65536 --reps 20 --warmup 3 --json "$O/bench.json" --md "$O/bench.md" > "$O/bench.log" 2>&1; echo "bench rc=$?"
grep -v "^ *$" "$O/bench.log" | grep -v "^#" | tail -14
say "varlen"
timeout 30 $B/tests/attn_doctor_tests "cuda: the wgmma and mma.sync kernels record the same violations" > $O/test-records.log 2>&1; echo "records test rc=$?"; grep -B3 -A10 FAILED $O/test-records.log | head -40; tail -3 $O/test-records.log
say "records test"
timeout 60 $B/tests/attn_doctor_tests "[cuda] ~[cuda-sweep] ~*backward*" > $O/test-fwd.log 2>&1; echo "fwd tests rc=$?"; grep -B3 -A12 "FAILED" $O/test-fwd.log | head -60; tail -3 $O/test-fwd.log
say "fwd tests"
timeout ${SWEEP_S:-60} $B/tests/attn_doctor_tests "[cuda-sweep]" > "$O/sweep.log" 2>&1; echo "sweep rc=$?"
grep -E "cuda sweep|passed|failed|FAILED" "$O/sweep.log" | head -20
say "sweep"
