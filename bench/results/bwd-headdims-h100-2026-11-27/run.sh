#!/bin/bash
# The checked backward at head dims 192 and 256 on the device: build (sm_90 + the sm_90a object
# library), the GPU backward tests, the CUDA/CPU head-dim sweep (forward and training steps),
# the backward against PyTorch's FA2 varlen backward at two sizes, then every CUDA/CPU sweep.
# Layout: tree/ (the repository), deps/ (scripts/stage-deps), this script; results under $OUT.
set -u
D=$(cd "$(dirname "$0")" && pwd)
R=$D/tree
B=/tmp/build-bwd
deps=$D/deps
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" | tee -a $OUT/gpu.txt
nvcc --version | tail -1 | tee -a $OUT/gpu.txt
cmake -S $R -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DATTN_DOCTOR_PYTHON=OFF \
  "-DCMAKE_PREFIX_PATH=$deps" "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json" \
  "-DCLI11_DIR=$deps/share/cmake/CLI11" "-DCatch2_DIR=$deps/lib/cmake/Catch2" \
  "-Dfmt_DIR=$deps/lib/x86_64-linux-gnu/cmake/fmt" "-Dspdlog_DIR=$deps/lib/x86_64-linux-gnu/cmake/spdlog" \
  > $OUT/build.log 2>&1 && timeout 170 ninja -C $B -j 16 attn_doctor_tests >> $OUT/build.log 2>&1
rc=$?
echo "== build rc=$rc in $((SECONDS - t0)) s"
[[ $rc -eq 0 ]] || { grep -B2 -A12 -m3 "error" $OUT/build.log | head -60; tail -n 20 $OUT/build.log; exit 1; }
cuda_lib=$(find $B -name 'libattn_doctor_cuda.a' | head -1); core_lib=$(find $B -name 'libattn_doctor_core.a' | head -1)
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so $R/bench/gpu/capi.cpp -I$R/kernels -I$R/lib -I$deps/include \
  -I$cudart_dir/../include -Wl,--no-undefined $cuda_lib $core_lib $cuda_lib -L$cudart_dir -lcudart_static -ldl -lrt -lpthread \
  >> $OUT/build.log 2>&1 &
capi=$!
T=$B/tests/attn_doctor_tests
cuobjdump --dump-resource-usage $T 2>/dev/null | grep -A1 -E "varlen_bwd_(split_)?kernel" | grep -E "Function|REG" > $OUT/resource-usage.txt
t=$SECONDS
timeout 40 $T "*backward*,cuda: an overshooting cu_seqlens_k*" -d yes > $OUT/tests-backward.log 2>&1
echo "== GPU backward tests rc=$? in $((SECONDS - t)) s: $(tail -n 2 $OUT/tests-backward.log | tr '\n' ' ')"
grep -E -A8 "FAILED" $OUT/tests-backward.log | head -40
t=$SECONDS
timeout 60 $T "cuda sweep: head dims 96\, 192 and 256 agree with the CPU backend" > $OUT/sweep-headdims.log 2>&1
echo "== head-dim sweep rc=$? in $((SECONDS - t)) s"; grep -E "^cuda sweep|passed|failed" $OUT/sweep-headdims.log | head
wait $capi; echo "== capi rc=$?"
t=$SECONDS
cd $R/bench/gpu
timeout 50 python3 bench_backward.py --lib $B/libad_bench.so --head-dims 192 256 --tokens 16384 65536 --reps 10 \
  --warmup 3 --json $OUT/bwd.json --md $OUT/bwd.md > $OUT/bwd.log 2>&1
echo "== backward bench rc=$? in $((SECONDS - t)) s"; grep -E "^bwd|FAILED|rror" $OUT/bwd.log
t=$SECONDS
left=$((175 - (SECONDS - t0)))
[[ $left -gt 20 ]] && { timeout $left $T "[cuda-sweep]" > $OUT/sweep-all.log 2>&1
  echo "== all sweeps rc=$? in $((SECONDS - t)) s"; grep -E "^cuda sweep|passed|failed" $OUT/sweep-all.log | head; }
echo "== total $((SECONDS - t0)) s"
