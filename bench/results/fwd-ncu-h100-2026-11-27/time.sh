#!/bin/bash
# The second device call: CUDA-event timings (no profiler) of the same variants at H = 16 and 32,
# with the checked form's parts (the record's reset alone, the checked form without it):
#   OUT=<dir> bash bench/results/fwd-ncu-h100-2026-11-27/time.sh DEPS
set -u
D=$(cd "$1" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=/tmp/b-ncu
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D \
  -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 \
  -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/ncu-cmake.log 2>&1
if ! ninja -C $B -j 16 attn_doctor_cuda attn_doctor_core > /tmp/ncu-build.log 2>&1; then grep -B2 -A12 "error" /tmp/ncu-build.log | head -80; exit 1; fi
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart_dir/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) $(find $B -name libattn_doctor_cuda.a) \
  -L$cudart_dir -lcudart_static -ldl -lrt -lpthread > /tmp/ncu-capi.log 2>&1 || { cat /tmp/ncu-capi.log; exit 1; }
echo "[$((SECONDS - t0)) s] built"
PYTHONUNBUFFERED=1 timeout 150 python3 bench/results/fwd-ncu-h100-2026-11-27/profile_fwd.py --lib $B/libad_bench.so \
  --time 30 --heads 16 32 2>&1 | tee "$O/time.log"
echo "[$((SECONDS - t0)) s] done"
