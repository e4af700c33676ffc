#!/usr/bin/env bash
# The warp-specialised wgmma backward (head dim 128; varlen_attention_bwd_wgmma_ws.cuh, built
# with ATTN_DOCTOR_BWD_WGMMA_WS=1) against the default build's wgmma kernel, in one device command:
#   OUT=<dir> bash bench/gpu/bwd_ws.sh [--deps DIR] [--head-dims "64 128"] [--tokens "16384 32768"]
#                                      [--tests SPEC] [--budget SECONDS]
#                                      [--before-flags FLAGS] [--after-flags FLAGS] [--before-src DIR]
# Builds this tree twice (the before build from DIR's sources where --before-src names another
# checkout, e.g. `git archive` of the base commit unpacked: each side with its own benchmark
# C API), with the CUDA flags --before-flags (default none: the default build)
# and --after-flags (default -DATTN_DOCTOR_BWD_WGMMA_WS=1: the unchecked form on the
# warp-specialised kernel too, at head dim 128), the after build with the Catch2 tests. E.g.
# --before-flags -DATTN_DOCTOR_BWD_WS_TMA=0 --after-flags "": the wgmma kernel against the
# checked form's warp-specialised kernel with loads by the tensor memory accelerator. Then, each
# stage started only while fewer than
# --budget seconds (default 420) have passed since the build began:
#   tests   the after build's GPU tests matching SPEC (Catch2 test spec; "" skips)
#   dense   bench_backward.py --dense, before then after (against cuDNN's and FA2's backward)
#   varlen  bench_backward.py (varlen batches, against FA2's), before then after
#   ncu     (--ncu) one dense backward (16 x 2048, H = 32, non-causal), both key-block kernels
# Results in $OUT: build.log, gpu.txt, tests.log, dense.log, dense-{before,after}.json,
# varlen.log, ncu.txt.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps=${ATTN_DOCTOR_DEPS:-$root/.device/deps}
out=${OUT:-$root/bench/results/local}
py=${PYTHON:-python3}
head_dims="128" tokens="16384 32768 65536" spec="" budget=420 ncu=0
before_flags="" after_flags="-DATTN_DOCTOR_BWD_WGMMA_WS=1" before_src=$root
while [[ $# -gt 0 ]]; do
  case $1 in
    --deps) deps=$(cd "$2" && pwd); shift 2 ;;
    --head-dims) head_dims=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --tests) spec=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --ncu) ncu=1; shift ;;
    --before-flags) before_flags=$2; shift 2 ;;
    --after-flags) after_flags=$2; shift 2 ;;
    --before-src) before_src=$(cd "$2" && pwd); shift 2 ;;
    *) echo "bwd_ws.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  nvcc --version | tail -2
} > "$out/gpu.txt" 2>&1
t0=$SECONDS
stage() {  # name: false once the budget is spent
  if (( SECONDS - t0 > budget )); then echo "== $1: skipped (budget of $budget s spent)"; return 1; fi
  echo "== $1 at $((SECONDS - t0)) s"
}
build_one() {  # source dir, build dir, CUDA flags, targets...
  local src=$1 b=$2 flags=$3; shift 3
  cmake -S "$src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_DOCTOR_CUDA=ON \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_CUDA_ARCHITECTURES=90 ${flags:+"-DCMAKE_CUDA_FLAGS=$flags"} \
    "-DCMAKE_PREFIX_PATH=$deps" "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json" \
    "-DCLI11_DIR=$deps/share/cmake/CLI11" "-DCatch2_DIR=$deps/lib/cmake/Catch2" \
    "-Dfmt_DIR=$deps/lib/x86_64-linux-gnu/cmake/fmt" "-Dspdlog_DIR=$deps/lib/x86_64-linux-gnu/cmake/spdlog" > /dev/null &&
  ninja -C "$b" -j "$(nproc)" attn_doctor_cuda attn_doctor_core "$@" &&
  local cudart_dir cuda_lib core_lib
  cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
  cuda_lib="$(find "$b" -name libattn_doctor_cuda.a | head -1)" core_lib="$(find "$b" -name libattn_doctor_core.a | head -1)"
  g++ -std=c++20 -O2 -shared -fPIC -o "$b/libad_bench.so" "$src/bench/gpu/capi.cpp" -I"$src/kernels" -I"$src/lib" \
    -I"$deps/include" -I"$cudart_dir/../include" -Wl,--no-undefined "$cuda_lib" "$core_lib" "$cuda_lib" \
    -L"$cudart_dir" -lcudart_static -ldl -lrt -lpthread
}
before=/tmp/build-bws-before after=/tmp/build-bws-after
targets=(); [[ -n $spec ]] && targets=(attn_doctor_tests)
build_one "$before_src" "$before" "$before_flags" > "$out/build.log" 2>&1 &
pid=$!
build_one "$root" "$after" "$after_flags" "${targets[@]}" > "$out/build-after.log" 2>&1
rc_after=$?
wait $pid; rc_before=$?
cat "$out/build-after.log" >> "$out/build.log"; rm -f "$out/build-after.log"
echo "== built before rc=$rc_before after rc=$rc_after at $((SECONDS - t0)) s"
grep -E "error|warning: .*spill" "$out/build.log" | head -n 20
[[ $rc_before -eq 0 && $rc_after -eq 0 ]] || { tail -n 30 "$out/build.log"; exit 1; }
status=0
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if [[ -n $spec ]] && stage tests; then
  (cd "$after" && timeout 240 ./tests/attn_doctor_tests "$spec" --durations yes > "$out/tests.log" 2>&1) || status=1
  grep -E 'passed|failed|FAILED|s: cuda' "$out/tests.log" | cut -c1-300 | tail -n 20
fi
if stage dense; then
  for side in before after; do
    lib=$before/libad_bench.so; [[ $side == after ]] && lib=$after/libad_bench.so
    echo "-- $side"
    timeout 150 "$py" "$root/bench/gpu/bench_backward.py" --lib "$lib" --dense --head-dims $head_dims \
      --json "$out/dense-$side.json" || status=1
  done 2>&1 | grep -E '^(--|dense|VERIF|all|SOME|Traceback|cuDNN)' | tee "$out/dense.log"
fi
if stage varlen; then
  for side in before after; do
    lib=$before/libad_bench.so; [[ $side == after ]] && lib=$after/libad_bench.so
    echo "-- $side"
    timeout 150 "$py" "$root/bench/gpu/bench_backward.py" --lib "$lib" --head-dims $head_dims --tokens $tokens \
      --json "$out/varlen-$side.json" || status=1
  done 2>&1 | grep -E '^(--|bwd|VERIF|all|SOME|Traceback)' | tee "$out/varlen.log"
fi
if [[ $ncu -eq 1 ]] && stage ncu; then
  for side in before after; do
    lib=$before/libad_bench.so; [[ $side == after ]] && lib=$after/libad_bench.so
    echo "#### $side"
    timeout 90 ncu --clock-control none --kernel-name regex:'varlen_bwd_wgmma' --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis \
      "$py" "$root/bench/gpu/bench_backward.py" --lib "$lib" --dense --dense-shapes 16x2048 --head-dims 128 --heads 32 \
      --reps 1 --warmup 0 2>&1 | grep -vE '^==PROF==|^\s*$'
  done > "$out/ncu.txt" 2>&1
  grep -E 'varlen_bwd|Duration|Compute \(SM\)|Eligible|Warp Cycles Per Issued|Registers|Stall|stall' "$out/ncu.txt" | cut -c1-160 | head -n 40
fi
echo "== done rc=$status at $((SECONDS - t0)) s"
exit $status
