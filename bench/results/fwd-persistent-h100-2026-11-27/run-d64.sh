#!/bin/bash
# One device call: the warp-specialised kernel at head dim 64 (a build with
# ATTN_DOCTOR_WGMMA_WS_D64, bf16) beside the launcher's d64 kernel (the wgmma kernel), cuDNN and
# FA2 on dense batches and FA2 on varlen ones. Outputs are compared with FA2's before timing.
# Run from a copy of the tree with the build dependencies in deps/: OUT=<dir> bash run-d64.sh
set -u
R=$(pwd); D=$R/deps; O=${OUT:-/tmp/out}; B=/tmp/b-h45-d64
t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-DATTN_DOCTOR_WGMMA_WS_D64 -DCMAKE_PREFIX_PATH=$D \
  -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 \
  -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > "$O/cmake.log" 2>&1 || { tail -30 $O/cmake.log; exit 1; }
if ! ninja -C $B -j 16 attn_doctor_cuda attn_doctor_core > "$O/build.log" 2>&1; then grep -B2 -A12 "error" "$O/build.log" | head -80; exit 1; fi
say "built"
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart_dir/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) $(find $B -name libattn_doctor_cuda.a) \
  -L$cudart_dir -lcudart_static -ldl -lrt -lpthread > "$O/capi.log" 2>&1 || { tail -20 "$O/capi.log"; exit 1; }
say "capi"
PYTHONUNBUFFERED=1 timeout 40 python3 bench/gpu/bench_dense_cudnn.py --lib $B/libad_bench.so --ws-d64 --head-dims 64 --reps 20 --warmup 3 \
  --json "$O/bench-dense-d64.json" --md "$O/bench-dense-d64.md" > "$O/bench-dense-d64.log" 2>&1; echo "dense rc=$?"
grep -v "^ *$" "$O/bench-dense-d64.log" | tail -12
say "dense"
PYTHONUNBUFFERED=1 timeout 40 python3 bench/gpu/bench_kernels.py --lib $B/libad_bench.so --ws-d64 --skip-memory --head-dims 64 \
  --tokens 16384 65536 --reps 20 --warmup 3 --json "$O/bench-d64.json" --md "$O/bench-d64.md" > "$O/bench-d64.log" 2>&1; echo "bench rc=$?"
grep -v "^ *$" "$O/bench-d64.log" | grep -v "^#" | tail -12
say "varlen"
