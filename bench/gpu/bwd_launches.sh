#!/usr/bin/env bash
# The backward's small launches (preprocess, dq conversion, group sum) before / after a change
# to their launcher, and the backward against cuDNN's on dense batches, in one device command.
#   git show COMMIT:kernels/varlen_attention_bwd.cu > DIR/varlen_attention_bwd.cu         # here
#   git show COMMIT:kernels/varlen_attention_bwd_small.cuh > DIR/varlen_attention_bwd_small.cuh
#   OUT=<dir> bash bench/gpu/bwd_launches.sh --before DIR [--deps DIR] [--budget SECONDS]
# Builds this tree (the extension, the benchmarks' C API libad_bench.so, the Catch2 tests) once
# with DIR's two files in place (only the extension and the C API are kept: "before"), then
# with this tree's (only varlen_attention_bwd.cu recompiles: "after"). Then, in order, each
# stage started only while fewer than --budget seconds (default 200) have passed since the
# build began:
#   dense   bench_backward.py --dense (after): the backward against cuDNN's and FA2's
#   small   bench_bwd_preprocess.py, before then after (the training step's shapes at 16k
#           tokens, d64 and d128)
#   ncu     one checked backward's three small launches, before and after (bench_backward.py,
#           d64, 32 heads / 4 key-value heads, 16k tokens)
#   tests   the GPU tests, after, but the two fp64 references and the forward's violation
#           sweep (the backward's tests and the training sweeps at head dims 64-256 run)
#   whole   bench_backward.py at the training step's d64 heads (32 / 4), before and after
# Results in $OUT: build.log, gpu.txt, bench-backward-dense.{json,md,log}, small-{before,after}.json,
# small.log, ncu-{before,after}.txt, tests.log, whole-{before,after}-d64.json, whole.log.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps=${ATTN_DOCTOR_DEPS:-$root/.device/deps}
out=${OUT:-$root/bench/results/local}
py=${PYTHON:-python3}
build=${BUILD:-/tmp/build-bwdl}
before="" budget=200
while [[ $# -gt 0 ]]; do
  case $1 in
    --before) before=$(cd "$2" && pwd); shift 2 ;;
    --deps) deps=$(cd "$2" && pwd); shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) echo "bwd_launches.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $before ]] || { echo "bwd_launches.sh: --before DIR is required" >&2; exit 2; }
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  nvcc --version | tail -2; command -v ncu && ncu --version | tail -1
} > "$out/gpu.txt" 2>&1
t0=$SECONDS
stage() {  # name: false once the budget is spent
  if (( SECONDS - t0 > budget )); then echo "== $1: skipped (budget of $budget s spent)"; return 1; fi
  echo "== $1 at $((SECONDS - t0)) s"
}
capi() {  # the benchmarks' C API, as scripts/gpu-check links it
  local cudart_dir cuda_lib core_lib
  cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
  cuda_lib="$(find "$build" -name 'libattn_doctor_cuda.a' | head -1)"
  core_lib="$(find "$build" -name 'libattn_doctor_core.a' | head -1)"
  g++ -std=c++20 -O2 -shared -fPIC -o "$1" "$root/bench/gpu/capi.cpp" -I"$root/kernels" -I"$root/lib" -I"$deps/include" \
    -I"$cudart_dir/../include" -Wl,--no-undefined "$cuda_lib" "$core_lib" "$cuda_lib" -L"$cudart_dir" -lcudart_static -ldl -lrt -lpthread
}
files=(varlen_attention_bwd.cu varlen_attention_bwd_small.cuh)
mkdir -p /tmp/bwdl-after "$build/before"
for f in "${files[@]}"; do cp "$root/kernels/$f" /tmp/bwdl-after/ && cp "$before/$f" "$root/kernels/$f"; done
{
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_DOCTOR_CUDA=ON -DATTN_DOCTOR_PYTHON=ON \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v "$py")" \
    "-DCMAKE_PREFIX_PATH=$deps" "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json" \
    "-DCLI11_DIR=$deps/share/cmake/CLI11" "-DCatch2_DIR=$deps/lib/cmake/Catch2" \
    "-Dfmt_DIR=$deps/lib/x86_64-linux-gnu/cmake/fmt" "-Dspdlog_DIR=$deps/lib/x86_64-linux-gnu/cmake/spdlog" &&
  ninja -C "$build" -j "$(nproc)" _native attn_doctor_cuda attn_doctor_core attn_doctor_tests &&
  cp "$build"/python/attn_doctor/_native*.so "$build/before/" && capi "$build/before/libad_bench.so"
} > "$out/build.log" 2>&1
rc=$?
for f in "${files[@]}"; do cp "/tmp/bwdl-after/$f" "$root/kernels/$f"; done
echo "== before built rc=$rc at $((SECONDS - t0)) s"
[[ $rc -eq 0 ]] || { tail -n 30 "$out/build.log"; exit 1; }
{ ninja -C "$build" -j "$(nproc)" _native attn_doctor_tests && capi "$build/libad_bench.so"; } >> "$out/build.log" 2>&1
rc=$?
echo "== after built rc=$rc at $((SECONDS - t0)) s"
[[ $rc -eq 0 ]] || { tail -n 30 "$out/build.log"; exit 1; }
status=0
lib_before=$build/before/libad_bench.so lib_after=$build/libad_bench.so
native() { [[ $1 == before ]] && echo "$build/before" || echo "$build/python/attn_doctor"; }
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1

if stage dense; then
  timeout 150 "$py" "$root/bench/gpu/bench_backward.py" --lib "$lib_after" --dense --json "$out/bench-backward-dense.json" \
    --md "$out/bench-backward-dense.md" > "$out/bench-backward-dense.log" 2>&1 || status=1
  grep -E '^(dense|VERIF|all|SOME|Traceback|cuDNN)' "$out/bench-backward-dense.log"
fi
if stage small; then
  for side in before after; do
    ATTN_DOCTOR_NATIVE_DIR=$(native $side) timeout 90 "$py" "$root/bench/gpu/bench_bwd_preprocess.py" --label $side \
      --tokens 16384 --head-dims 64 128 --reps 10 --json "$out/small-$side.json" || status=1
  done 2>&1 | grep -v -i 'warn' | tee "$out/small.log"
fi
if stage ncu && command -v ncu > /dev/null; then
  for side in before after; do
    lib=$lib_before; [[ $side == after ]] && lib=$lib_after
    timeout 90 ncu --clock-control none --kernel-name regex:'varlen_bwd_(preprocess|convert_dq|group_sum)' \
      --launch-count 3 --section SpeedOfLight --section Occupancy --section LaunchStats \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,sm__ctas_launched.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
      "$py" "$root/bench/gpu/bench_backward.py" --lib "$lib" --tokens 16384 --head-dims 64 --heads 32 --heads-k 4 \
      --reps 1 --warmup 0 > "$out/ncu-$side.txt" 2>&1 || echo "ncu $side failed"
    grep -E 'varlen_bwd_|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|dram__bytes|local_op|ctas_launched|warps_active' \
      "$out/ncu-$side.txt" | sed "s/^/$side /" | cut -c1-160
  done
fi
if stage tests; then
  # the GPU tests but the fp64 references (97 s and 8 s on an H100) and the forward's violation
  # sweep: the backward's tests, the training sweeps (head dims 64-256) and the rest
  spec='[cuda]~"cuda: varlen backward matches fp64 gradients"~"cuda: varlen forward matches fp64 attention"'
  spec+='~"cuda sweep: CUDA and CPU backends report the same violations on >= 200 batches"'
  (cd "$build" && timeout 120 ./tests/attn_doctor_tests "$spec" --durations yes > "$out/tests.log" 2>&1) || status=1
  grep -E '^cuda sweep|passed|failed|FAILED' "$out/tests.log" | cut -c1-400 | tail -n 8
fi
if stage whole; then
  for side in before after; do
    lib=$lib_before; [[ $side == after ]] && lib=$lib_after
    timeout 60 "$py" "$root/bench/gpu/bench_backward.py" --lib "$lib" --tokens 16384 --head-dims 64 --heads 32 --heads-k 4 \
      --json "$out/whole-$side-d64.json" || status=1
  done 2>&1 | grep -E '^(bwd|VERIF|all|SOME|Traceback)' | tee "$out/whole.log"
fi
echo "== done rc=$status at $((SECONDS - t0)) s"
exit $status
