#!/usr/bin/env bash
# ncu of the backward's key-block kernel against FA2's and cuDNN's backward kernels on dense
# batches (bf16, H = 32 query and key heads, non-causal), in one device command:
#   OUT=<dir> bash bench/gpu/bwd_profile.sh [--deps DIR] [--head-dim D] [--shapes 16x2048 4x8192]
# Builds the kernels' library and the benchmarks' C API (libad_bench.so), then for each shape
# runs bench_backward.py --dense once (one rep) under ncu --set full for the kernels named
# varlen_bwd_wgmma(_ws) / flash_bwd_dq_dk_dv / cuDNN's SDPA kernels. Results in
# $OUT: build.log, gpu.txt, ncu-<shape>.txt (details page), summary.txt (the lines quoted in the
# README).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps=${ATTN_DOCTOR_DEPS:-$root/.device/deps}
out=${OUT:-$root/bench/results/local}
py=${PYTHON:-python3}
build=${BUILD:-/tmp/build-bwdp}
head_dim=128 shapes=(16x2048 4x8192)
while [[ $# -gt 0 ]]; do
  case $1 in
    --deps) deps=$(cd "$2" && pwd); shift 2 ;;
    --head-dim) head_dim=$2; shift 2 ;;
    --shapes) shift; shapes=(); while [[ $# -gt 0 && $1 != --* ]]; do shapes+=("$1"); shift; done ;;
    *) echo "bwd_profile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  nvcc --version | tail -2; command -v ncu && ncu --version | tail -1
} > "$out/gpu.txt" 2>&1
t0=$SECONDS
{
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_DOCTOR_CUDA=ON \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_CUDA_ARCHITECTURES=90 ${CUDA_FLAGS:+"-DCMAKE_CUDA_FLAGS=$CUDA_FLAGS"} \
    "-DCMAKE_PREFIX_PATH=$deps" "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json" \
    "-DCLI11_DIR=$deps/share/cmake/CLI11" "-DCatch2_DIR=$deps/lib/cmake/Catch2" \
    "-Dfmt_DIR=$deps/lib/x86_64-linux-gnu/cmake/fmt" "-Dspdlog_DIR=$deps/lib/x86_64-linux-gnu/cmake/spdlog" &&
  ninja -C "$build" -j "$(nproc)" attn_doctor_cuda attn_doctor_core &&
  cudart_dir="$(dirname "$(command -v nvcc)")/../lib64" &&
  g++ -std=c++20 -O2 -shared -fPIC -o "$build/libad_bench.so" "$root/bench/gpu/capi.cpp" -I"$root/kernels" -I"$root/lib" \
    -I"$deps/include" -I"$cudart_dir/../include" -Wl,--no-undefined "$(find "$build" -name libattn_doctor_cuda.a | head -1)" \
    "$(find "$build" -name libattn_doctor_core.a | head -1)" "$(find "$build" -name libattn_doctor_cuda.a | head -1)" \
    -L"$cudart_dir" -lcudart_static -ldl -lrt -lpthread
} > "$out/build.log" 2>&1 || { echo "build failed"; tail -n 30 "$out/build.log"; exit 1; }
echo "== built at $((SECONDS - t0)) s"
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
: > "$out/summary.txt"
for shape in "${shapes[@]}"; do
  timeout 240 ncu --clock-control none --set full --import-source no \
    --kernel-name regex:'varlen_bwd_wgmma|flash_bwd_dq_dk_dv|sdpa|cudnn' --launch-count 8 \
    "$py" "$root/bench/gpu/bench_backward.py" --lib "$build/libad_bench.so" --dense --dense-shapes "$shape" \
    --head-dims "$head_dim" --heads 32 --reps 1 --warmup 0 > "$out/ncu-$shape.txt" 2>&1 || echo "ncu $shape rc=$?"
  { echo "#### $shape"
    grep -E '^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc Active|No Eligible|Warp Cycles Per Issued|L2 Hit Rate|Dynamic Shared|Grid Size|Block Size|Local Memory Spilling|One or More Eligible|Active Warps Per' "$out/ncu-$shape.txt" | cut -c1-170
    grep -E 'stall|Stall' "$out/ncu-$shape.txt" | grep -vE '^\s*$' | cut -c1-300 | head -n 60
  } >> "$out/summary.txt"
  echo "== $shape at $((SECONDS - t0)) s"
done
# the stall breakdown and tensor-pipe / reduction counters of the same kernels (first shape)
timeout 150 ncu --clock-control none --kernel-name regex:'varlen_bwd_wgmma|flash_bwd_dq_dk_dv|sdpa|cudnn' \
  --launch-count 8 --metrics gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,smsp__inst_executed_op_global_red.sum,lts__t_sectors_op_red.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_lg_throttle.ratio,smsp__average_warp_latency_issue_stalled_membar.ratio,smsp__average_warp_latency_issue_stalled_wait.ratio,smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio,smsp__average_warp_latency_issue_stalled_dispatch_stall.ratio,smsp__average_warp_latency_issue_stalled_selected.ratio \
  "$py" "$root/bench/gpu/bench_backward.py" --lib "$build/libad_bench.so" --dense --dense-shapes "${shapes[0]}" \
  --head-dims "$head_dim" --heads 32 --reps 1 --warmup 0 > "$out/ncu-metrics.txt" 2>&1 || echo "ncu metrics rc=$?"
grep -vE '^==PROF==|^\s*$' "$out/ncu-metrics.txt" | cut -c1-170 | tail -n 160 >> "$out/summary.txt"
echo "== done at $((SECONDS - t0)) s"
