#!/usr/bin/env bash
# The warp-specialised backward with its dq_accum reductions on their own producer warps,
# against main's (HEAD, unpacked from .device/before.tgz, made by
# `git archive HEAD | gzip`), in one device command:
#   OUT=<dir> bash bench/results/bwd-step-h100-2026-11-28/dq-warps/run2.sh
# Call 2, dq-warps.patch applied (one dQ tile, main's order of a step, d128 only): builds before
# (main) and after (this tree, with the tests); bench_backward.py dense at d128, build after
# build; the after build's backward GPU tests and the CUDA vs CPU training sweep; then varlen.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)
deps=$root/.device/deps out=${OUT:-/tmp/dqw}
mkdir -p "$out" /tmp/before-src && tar xzf "$root/.device/before.tgz" -C /tmp/before-src
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'; } > "$out/gpu.txt" 2>&1
declare -A src=([before]=/tmp/before-src [after]=$root)
declare -A flags=([before]="" [after]="")
t0=$SECONDS
for v in before after; do
  ( b=/tmp/dqw2-$v; extra=(); [[ $v == after ]] && extra=(attn_doctor_tests)
    cmake -S "${src[$v]}" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_DOCTOR_CUDA=ON \
      -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_CUDA_ARCHITECTURES=90 ${flags[$v]:+"-DCMAKE_CUDA_FLAGS=${flags[$v]}"} \
      "-DCMAKE_PREFIX_PATH=$deps" "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json" \
      "-DCLI11_DIR=$deps/share/cmake/CLI11" "-DCatch2_DIR=$deps/lib/cmake/Catch2" \
      "-Dfmt_DIR=$deps/lib/x86_64-linux-gnu/cmake/fmt" "-Dspdlog_DIR=$deps/lib/x86_64-linux-gnu/cmake/spdlog" > /dev/null &&
    ninja -C "$b" -j 8 attn_doctor_cuda attn_doctor_core "${extra[@]}" > /dev/null &&
    cudart_dir="$(dirname "$(command -v nvcc)")/../lib64" && lc="$(find "$b" -name libattn_doctor_cuda.a | head -1)" &&
    g++ -std=c++20 -O2 -shared -fPIC -o "$b/libad_bench.so" "${src[$v]}/bench/gpu/capi.cpp" -I"${src[$v]}/kernels" \
      -I"${src[$v]}/lib" -I"$deps/include" -I"$cudart_dir/../include" -Wl,--no-undefined "$lc" \
      "$(find "$b" -name libattn_doctor_core.a | head -1)" "$lc" -L"$cudart_dir" -lcudart_static -ldl -lrt -lpthread
    echo "built $v rc=$? at $((SECONDS - t0)) s" ) > "$out/build-$v.log" 2>&1 &
done
wait
cat "$out"/build-*.log | grep -E "built|error" | head
export PYTHONPATH=$root/python PYTHONUNBUFFERED=1
for v in before after; do
  echo "-- $v"
  timeout 120 python3 "$root/bench/gpu/bench_backward.py" --lib /tmp/dqw2-$v/libad_bench.so --dense --head-dims 128 \
    --json "$out/dense-$v.json" 2>&1 | grep -E '^(dense|all|SOME|VERIF)'
done | tee "$out/dense.log"
spec='*backward*,cuda sweep: CUDA and CPU backends agree on the training sweep'
(cd /tmp/dqw2-after && timeout $((380 - (SECONDS - t0))) ./tests/attn_doctor_tests "$spec" > "$out/tests.log" 2>&1); echo "tests rc=$? at $((SECONDS - t0)) s"
tail -2 "$out/tests.log"
for v in before after; do
  echo "-- $v"
  timeout 120 python3 "$root/bench/gpu/bench_backward.py" --lib /tmp/dqw2-$v/libad_bench.so --head-dims 128 \
    --tokens 16384 65536 --json "$out/varlen-$v.json" 2>&1 | grep -E '^(bwd|all|SOME|VERIF)'
done | tee "$out/varlen.log"
echo "== done at $((SECONDS - t0)) s"
