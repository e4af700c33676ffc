#!/bin/bash
# The forward's interior K/V loads, measured: one device call, run from the root of a copy of
# the tree (bash bench/results/fwd-speed-h100-2026-11-27/run.sh DEPS), results to $OUT.
# The build carries the wgmma kernel twice: the default (this tree) and, as the benchmarks'
# "alt" variant, the kernel before the change (P in registers, interior loads off: the
# WgmmaAlt patch below, applied to the copy only), so both run in the same process on the
# same GPU. Steps: build (sm_90 + sm_90a), forward GPU tests, CUDA/CPU sweeps, varlen bench
# vs FA2, dense bench vs cuDNN and FA2, ncu of both kernels at d128.
set -u
D=$(cd "$1" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=/tmp/b-h33
t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$O/gpu.txt"
python3 - <<'EOF'
p = 'kernels/sm90a/varlen_attention_wgmma.cuh'
s = open(p).read()
a = """template <int D> struct WgmmaAlt {
  static constexpr int kBlockN = D == 64 ? 64 : 128, kMinBlocks = D == 64 ? 2 : 1;
  static constexpr bool kPSmem = true, kInteriorLoads = true;
};"""
b = """template <int D> struct WgmmaAlt {
  static constexpr int kBlockN = D == 128 ? 128 : 64, kMinBlocks = D == 64 ? 2 : 1;
  static constexpr bool kPSmem = false, kInteriorLoads = false;
};"""
assert a in s
open(p, 'w').write(s.replace(a, b))
EOF
if [[ ! -f $B/build.ninja ]]; then
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-DATTN_DOCTOR_WGMMA_ALT -DCMAKE_PREFIX_PATH=$D \
  -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 \
  -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > "$O/cmake.log" 2>&1
fi
if ! ninja -C $B -j 16 attn_doctor_tests > "$O/build.log" 2>&1; then tail -60 "$O/build.log"; exit 1; fi
say "built"
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart_dir/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) $(find $B -name libattn_doctor_cuda.a) \
  -L$cudart_dir -lcudart_static -ldl -lrt -lpthread > "$O/capi.log" 2>&1 || { cat "$O/capi.log"; exit 1; }
say "capi"
PYTHONUNBUFFERED=1 timeout 110 python3 bench/gpu/bench_kernels.py --lib $B/libad_bench.so --wgmma-alt --skip-memory \
  --reps 20 --warmup 3 --json "$O/bench.json" --md "$O/bench.md" > "$O/bench.log" 2>&1; echo "bench rc=$?"
grep -v "^ *$" "$O/bench.log" | tail -40
say "bench"
PYTHONUNBUFFERED=1 timeout 60 python3 bench/gpu/bench_dense_cudnn.py --lib $B/libad_bench.so --wgmma-alt --reps 20 --warmup 3 \
  --json "$O/bench-dense.json" --md "$O/bench-dense.md" > "$O/bench-dense.log" 2>&1; echo "dense rc=$?"
cat "$O/bench-dense.log" | tail -20
say "dense"
say "done"
