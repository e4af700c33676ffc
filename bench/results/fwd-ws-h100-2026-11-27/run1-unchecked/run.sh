#!/bin/bash
# One device call: build (sm_90 + sm_90a), forward GPU tests, benchmarks old vs new.
set -u
R=$(pwd); D=$R/deps; O=${OUT:-/tmp/out}; B=/tmp/b-h41
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
grep -A3 "wgmma_ws_kernel" $O/build.log | grep -i "spill" | head
timeout 60 $B/tests/attn_doctor_tests "cuda: the warp-specialised wgmma forward matches fp64 attention" > $O/test-ws.log 2>&1; rc=$?; echo "ws test rc=$rc"; tail -25 $O/test-ws.log
[[ $rc == 124 ]] && exit 1
say "ws test"
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart_dir/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) $(find $B -name libattn_doctor_cuda.a) \
  -L$cudart_dir -lcudart_static -ldl -lrt -lpthread > "$O/capi.log" 2>&1 || { cat "$O/capi.log"; exit 1; }
say "capi"
PYTHONUNBUFFERED=1 timeout 70 python3 bench/gpu/bench_dense_cudnn.py --lib $B/libad_bench.so --wgmma-ws --head-dims 128 64 --reps 20 --warmup 3 \
  --json "$O/bench-dense.json" --md "$O/bench-dense.md" > "$O/bench-dense.log" 2>&1; echo "dense rc=$?"
cat "$O/bench-dense.log" | tail -24
say "dense"
PYTHONUNBUFFERED=1 timeout 70 python3 bench/gpu/bench_kernels.py --lib $B/libad_bench.so --wgmma-ws --skip-memory --head-dims 128 \
  --tokens 16384 65536 --reps 20 --warmup 3 --json "$O/bench.json" --md "$O/bench.md" > "$O/bench.log" 2>&1; echo "bench rc=$?"
grep -v "^ *$" "$O/bench.log" | tail -16
say "varlen"
timeout 45 $B/tests/attn_doctor_tests "[cuda] ~[cuda-sweep] ~*backward*" > $O/test-fwd.log 2>&1; echo "fwd tests rc=$?"; tail -6 $O/test-fwd.log
say "fwd tests"
