#!/bin/bash
# The d192 forward's check overhead on the merged tree (a fourth call): build the CUDA libraries
# (sm_90 / sm_90a) and bench/gpu/capi.cpp, then bench_kernels.py at head dim 192 (varlen bf16 vs
# FA2, checked and unchecked, H = 16, 20 rounds), twice. From the repository root with
# scripts/stage-deps's prefix in .device/deps:
#   OUT=<dir> bash bench/results/gpu-check-h100-2026-11-27-merged8/d192.sh
set -u
R=$(pwd); D=$R/.device/deps; B=/tmp/b192; t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu-d192.txt
cudart=$(dirname $(command -v nvcc))/../lib64
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json \
  -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt \
  -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
ninja -C $B -j 16 attn_doctor_cuda attn_doctor_core > /tmp/build.log 2>&1 || { grep -B2 -A12 error /tmp/build.log | head -40; exit 1; }
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) \
  $(find $B -name libattn_doctor_cuda.a) -L$cudart -lcudart_static -ldl -lrt -lpthread || exit 1
echo "built in $((SECONDS - t0)) s"
export PYTHONPATH=$R/python PYTHONUNBUFFERED=1
for i in 1 2; do
  timeout 90 python3 bench/gpu/bench_kernels.py --lib $B/libad_bench.so --tokens 16384 65536 --head-dims 192 --heads 16 \
    --reps 20 --skip-memory --json $OUT/fwd-d192-$i.json 2>&1 | grep "^attn\|VERIF" | tee -a $OUT/fwd-d192.log
done
echo "done in $((SECONDS - t0)) s"
