#!/bin/bash
# The d128 forward profiled in one device call, from the root of a copy of the tree:
#   OUT=<dir> bash bench/results/fwd-ncu-h100-2026-11-27/run.sh DEPS
# (DEPS: the dependency prefix of scripts/gpu-check --deps). Builds the CUDA libraries (sm_90 +
# sm_90a) and bench/gpu/capi.cpp, then runs profile_fwd.py under nsys (20 calls of each variant:
# the timeline of the checked form's record reset, first and second launch) and under ncu (one
# call of each: throughput, pipes, issue slots, stalls, occupancy).
set -u
D=$(cd "$1" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=/tmp/b-ncu
P=bench/results/fwd-ncu-h100-2026-11-27/profile_fwd.py
t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; nvcc --version | tail -2
  ncu --version | tail -1; nsys --version; python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'
} > "$O/env.txt" 2>&1; cat "$O/env.txt"
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D \
  -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 \
  -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/ncu-cmake.log 2>&1
if ! ninja -C $B -j 16 attn_doctor_cuda attn_doctor_core > /tmp/ncu-build.log 2>&1; then grep -B2 -A12 "error" /tmp/ncu-build.log | head -80; exit 1; fi
say "built"
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart_dir/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) $(find $B -name libattn_doctor_cuda.a) \
  -L$cudart_dir -lcudart_static -ldl -lrt -lpthread > /tmp/ncu-capi.log 2>&1 || { cat /tmp/ncu-capi.log; exit 1; }
say "capi"
# nsys: the timeline (kernels and copies with start and duration)
timeout 150 nsys profile -o $B/trace -f true -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \
  python3 $P --lib $B/libad_bench.so --reps 20 > "$O/profile.log" 2>&1; echo "nsys rc=$?"
timeout 60 nsys stats -r cuda_gpu_trace -f csv -o $B/trace $B/trace.nsys-rep > /dev/null 2>&1; echo "stats rc=$?"
cp $B/trace_cuda_gpu_trace.csv "$O/nsys_gpu_trace.csv" 2>/dev/null
say "nsys"
# ncu: one call of each variant; the tensor pipes' metrics where this ncu names them
extra=$(ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' | \
  grep -E '^sm__pipe_tensor_op_(gmma|hmma)_cycles_active$|^sm__pipe_shared_cycles_active$' | \
  sed 's/$/.avg.pct_of_peak_sustained_active/' | paste -sd, -)
echo "extra metrics: $extra"
secs="--section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis"
timeout 240 ncu --profile-from-start off --clock-control none --nvtx $secs ${extra:+--metrics $extra} -f -o $O/fwd \
  python3 $P --lib $B/libad_bench.so --reps 1 >> "$O/profile.log" 2>&1; rc=$?; echo "ncu rc=$rc"
if [[ $rc -ne 0 && -n "$extra" ]]; then
  timeout 200 ncu --profile-from-start off --clock-control none --nvtx $secs -f -o $O/fwd \
    python3 $P --lib $B/libad_bench.so --reps 1 >> "$O/profile.log" 2>&1; echo "ncu (no extra metrics) rc=$?"
fi
ncu --import $O/fwd.ncu-rep --page details --csv > "$O/ncu_details.csv" 2>&1
ncu --import $O/fwd.ncu-rep --page raw --csv > "$O/ncu_raw.csv" 2>&1
ls -la "$O"
say "done"
