#!/bin/bash
# The same as run.sh with head dim 96's mma.sync key tiles at 64 keys (FA2's 128 x 64 tile):
# build, the GPU tests, the head-dim sweep, the d96 forward benchmark.
set -u
D=$(cd "$(dirname "$0")" && pwd)
R=$D/tree
B=/tmp/build-hd
deps=$D/deps
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu.txt
cmake -S $R -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DATTN_DOCTOR_PYTHON=OFF \
  "-DCMAKE_PREFIX_PATH=$deps" "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json" \
  "-DCLI11_DIR=$deps/share/cmake/CLI11" "-DCatch2_DIR=$deps/lib/cmake/Catch2" \
  "-Dfmt_DIR=$deps/lib/x86_64-linux-gnu/cmake/fmt" "-Dspdlog_DIR=$deps/lib/x86_64-linux-gnu/cmake/spdlog" \
  > $OUT/build.log 2>&1 && ninja -C $B -j 16 attn_doctor_tests >> $OUT/build.log 2>&1
rc=$?
echo "== build rc=$rc in $((SECONDS - t0)) s"
[[ $rc -eq 0 ]] || { tail -n 60 $OUT/build.log; exit 1; }
cuda_lib=$(find $B -name 'libattn_doctor_cuda.a' | head -1); core_lib=$(find $B -name 'libattn_doctor_core.a' | head -1)
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so $R/bench/gpu/capi.cpp -I$R/kernels -I$R/lib -I$deps/include \
  -I$cudart_dir/../include -Wl,--no-undefined $cuda_lib $core_lib $cuda_lib -L$cudart_dir -lcudart_static -ldl -lrt -lpthread \
  >> $OUT/build.log 2>&1 || echo "== libad_bench.so failed"
T=$B/tests/attn_doctor_tests
t=$SECONDS
timeout 200 $T "[cuda]~[cuda-sweep]" > $OUT/tests-cuda.log 2>&1
echo "== GPU tests (all [cuda] but the sweeps) rc=$? in $((SECONDS - t)) s: $(tail -n 2 $OUT/tests-cuda.log | tr '\n' ' ')"
grep -E "FAILED|failed" $OUT/tests-cuda.log | head -20
t=$SECONDS
timeout 150 $T "[cuda-sweep]" > $OUT/sweeps.log 2>&1
echo "== all sweeps rc=$? in $((SECONDS - t)) s"; grep -E "^cuda sweep|passed|failed" $OUT/sweeps.log | head
t=$SECONDS
cd $R/bench/gpu
timeout 100 python3 bench_kernels.py --lib $B/libad_bench.so --head-dims 96 --tokens 16384 65536 --reps 10 \
  --warmup 3 --skip-memory --json $OUT/fwd-d96.json --md $OUT/fwd-d96.md > $OUT/fwd-d96.log 2>&1
echo "== forward bench rc=$? in $((SECONDS - t)) s"; grep -E "^attn|FAILED" $OUT/fwd-d96.log
echo "== total $((SECONDS - t0)) s"
