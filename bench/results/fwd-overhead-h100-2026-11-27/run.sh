#!/bin/bash
# The checked forward in two launches, measured in one device call from the root of a copy of
# the tree: `bash bench/results/fwd-overhead-h100-2026-11-27/run.sh DEPS` (DEPS: the
# dependency prefix of scripts/gpu-check --deps), results to $OUT.
# One build (sm_90 + sm_90a, -DATTN_DOCTOR_FWD_ONE_LAUNCH) carries both checked forms of each
# tensor-core kernel: the two-launch form (the default) and the checked body on every CTA in
# one launch, as before (AttnKernel::wgmma_one_launch / tensor_core_one_launch), so before and
# after run in the same process, interleaved (bench_kernels.py / bench_dense_cudnn.py
# --one-launch). Steps: build, the forward's GPU tests (with the one-launch vs two-launch
# comparison this build enables), varlen benchmark against FA2
# (d64 / d128 / d192, 16k-64k tokens), dense benchmark against cuDNN and FA2, the CUDA/CPU sweep.
# At most 8 files come back from a call: the build logs stay in /tmp.
set -u
D=$(cd "$1" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=/tmp/b-h42
t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$O/gpu.txt"
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-DATTN_DOCTOR_FWD_ONE_LAUNCH -DCMAKE_PREFIX_PATH=$D \
  -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 \
  -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/h42-cmake.log 2>&1
if ! ninja -C $B -j 16 attn_doctor_tests > /tmp/h42-build.log 2>&1; then grep -B2 -A12 "error" /tmp/h42-build.log | head -80; exit 1; fi
say "built"
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart_dir/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) $(find $B -name libattn_doctor_cuda.a) \
  -L$cudart_dir -lcudart_static -ldl -lrt -lpthread > /tmp/h42-capi.log 2>&1 || { cat /tmp/h42-capi.log; exit 1; }
say "capi"
# the forward's GPU tests (test_cuda_kernels.cpp's attention tests and the phantom segment)
timeout 150 $B/tests/attn_doctor_tests "cuda: varlen forward*,*unchecked and generic forms*,cuda: the wgmma and mma.sync*,\
cuda: the checked forward in two launches*,cuda: an overshooting cu_seqlens is*,cuda: a negative cu_seqlens*,\
cuda: max_seqlen*,cuda: the single-query*,cuda: a grid over*,cuda: a phantom*" > "$O/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^(All tests passed|test cases:)" "$O/tests.log"
grep -E "FAILED|failed|passed|SKIPPED|with expansion" -A3 "$O/tests.log" | head -60
say "tests"
PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/bench_kernels.py --lib $B/libad_bench.so --one-launch --skip-memory \
  --head-dims 64 128 192 --reps 20 --warmup 3 --json "$O/bench.json" --md "$O/bench.md" > "$O/bench.log" 2>&1
echo "bench rc=$?"; grep -v "^ *$" "$O/bench.log" | grep -v "^|" | tail -60
say "bench"
PYTHONUNBUFFERED=1 timeout 60 python3 bench/gpu/bench_dense_cudnn.py --lib $B/libad_bench.so --one-launch --reps 20 --warmup 3 \
  --json "$O/bench-dense.json" > "$O/bench-dense.log" 2>&1; echo "dense rc=$?"; tail -20 "$O/bench-dense.log"
say "dense"
timeout 200 $B/tests/attn_doctor_tests "[cuda-sweep]" > "$O/sweep.log" 2>&1; echo "sweep rc=$?"
grep -E "cuda sweep|passed|failed|FAILED" "$O/sweep.log" | head -20
say "done"
