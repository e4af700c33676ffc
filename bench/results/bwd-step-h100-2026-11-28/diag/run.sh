#!/usr/bin/env bash
# Diagnostic builds of the checked d128 warp-specialised backward, each with one part of the
# step taken out (diag.patch adds the switches; their gradients are wrong, only their time
# counts), timed on dense batches against the unchanged build in the same process rounds:
#   OUT=<dir> bash bench/results/bwd-step-h100-2026-11-28/diag/run.sh
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)
deps=$root/.device/deps out=${OUT:-/tmp/diag}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt"
declare -A flags=([base]="" [no_dq_red]="-DDIAG_NO_DQ_RED=1" [no_rule]="-DDIAG_NO_RULE=1" [no_dq]="-DDIAG_NO_DQ=1")
t0=$SECONDS
for v in "${!flags[@]}"; do
  ( b=/tmp/diag-$v
    cmake -S "$root" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_DOCTOR_CUDA=ON \
      -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_CUDA_ARCHITECTURES=90 ${flags[$v]:+"-DCMAKE_CUDA_FLAGS=${flags[$v]}"} \
      "-DCMAKE_PREFIX_PATH=$deps" "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json" \
      "-DCLI11_DIR=$deps/share/cmake/CLI11" "-DCatch2_DIR=$deps/lib/cmake/Catch2" \
      "-Dfmt_DIR=$deps/lib/x86_64-linux-gnu/cmake/fmt" "-Dspdlog_DIR=$deps/lib/x86_64-linux-gnu/cmake/spdlog" > /dev/null &&
    ninja -C "$b" -j 4 attn_doctor_cuda attn_doctor_core > /dev/null &&
    cudart_dir="$(dirname "$(command -v nvcc)")/../lib64" &&
    g++ -std=c++20 -O2 -shared -fPIC -o "$b/libad_bench.so" "$root/bench/gpu/capi.cpp" -I"$root/kernels" -I"$root/lib" \
      -I"$deps/include" -I"$cudart_dir/../include" -Wl,--no-undefined "$(find "$b" -name libattn_doctor_cuda.a | head -1)" \
      "$(find "$b" -name libattn_doctor_core.a | head -1)" "$(find "$b" -name libattn_doctor_cuda.a | head -1)" \
      -L"$cudart_dir" -lcudart_static -ldl -lrt -lpthread
    echo "built $v rc=$? at $((SECONDS - t0)) s" ) > "$out/build-$v.log" 2>&1 &
done
wait
cat "$out"/build-*.log | grep built
export PYTHONPATH=$root/python PYTHONUNBUFFERED=1
for round in 1; do
  for v in base no_dq_red no_rule no_dq base; do
    echo "-- $v (round $round)"
    timeout 100 python3 "$root/bench/gpu/bench_backward.py" --lib /tmp/diag-$v/libad_bench.so --dense --head-dims 128 \
      --json "$out/dense-$v-$round.json" 2>&1 | grep -E '^dense'
  done
done | tee "$out/dense.log"
echo "== done at $((SECONDS - t0)) s"
