#!/bin/bash
# The forward's in-bounds test split over the warps (fwd_cta_in_bounds_split), in every
# forward kernel's first launch, against its parent in one device call. Run from the
# repository root with scripts/stage-deps's prefix in .device/deps and the parent commit's
# kernels/ and lib/ in .device/before:
#   OUT=<dir> bash bench/results/fwd-bounds-split-h100-2026-11-27b/run.sh
# Builds this tree (sm_90 / sm_90a, with the one-launch forms the two-launch test compares
# against) and the parent beside it, runs the GPU tests without the sweep and the corpus on
# CUDA, then times both: bench_kernels.py --wgmma-ws (varlen bf16 vs FA2, d64 / d128, every
# kernel's checked and unchecked forms) and profile_fwd.py --time (dense, vs cuDNN).
set -u
R=$(pwd); D=$R/.device/deps; B=/tmp/bs; t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/gpu.txt
cudart=$(dirname $(command -v nvcc))/../lib64
configure() {  # src build extra-cuda-flags
  cmake -S $1 -B $2 -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_CUDA_FLAGS=$3" -DCMAKE_PREFIX_PATH=$D -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json \
    -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt \
    -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > $2.cfg.log 2>&1
}
link_bench() {  # src build
  g++ -std=c++20 -O2 -shared -fPIC -o $2/libad_bench.so $1/bench/gpu/capi.cpp -I$1/kernels -I$1/lib -I$D/include \
    -I$cudart/../include -Wl,--no-undefined $(find $2 -name libattn_doctor_cuda.a) $(find $2 -name libattn_doctor_core.a) \
    $(find $2 -name libattn_doctor_cuda.a) -L$cudart -lcudart_static -ldl -lrt -lpthread
}
configure . $B "-DATTN_DOCTOR_FWD_ONE_LAUNCH" || { tail -20 $B.cfg.log; exit 1; }
ninja -C $B -j 16 attn_doctor_tests attn-doctor attn_doctor_cuda attn_doctor_core > /tmp/build.log 2>&1 || { grep -B2 -A12 error /tmp/build.log | head -60; exit 1; }
link_bench . $B || exit 1
say "built"
P=/tmp/before-src; rm -rf $P; mkdir -p $P; cp -r CMakeLists.txt app bench python tests tools scripts docs repro_cases $P/ 2>/dev/null
cp -r .device/before/kernels .device/before/lib $P/
( configure $P /tmp/bs-before "" && nice ninja -C /tmp/bs-before -j 16 attn_doctor_cuda attn_doctor_core > /tmp/build-b.log 2>&1 &&
  link_bench $P /tmp/bs-before && say "before built" ) &
timeout 200 $B/tests/attn_doctor_tests "[cuda]" "~[cuda-sweep]" > $OUT/tests.log 2>&1; echo "tests rc=$?"; tail -3 $OUT/tests.log
say "tests done"
timeout 80 $B/attn-doctor repro repro_cases --backend cuda > $OUT/corpus.log 2>&1; echo "corpus rc=$?"; tail -1 $OUT/corpus.log
say "corpus done"
wait
export PYTHONPATH=$R/python PYTHONUNBUFFERED=1
for side in before after; do
  lib=$B/libad_bench.so; [[ $side == before ]] && lib=/tmp/bs-before/libad_bench.so
  echo "== $side varlen" | tee -a $OUT/bench.log
  timeout 100 python3 bench/gpu/bench_kernels.py --lib $lib --tokens 16384 65536 --head-dims 64 128 --heads 16 --reps 20 \
    --wgmma-ws --skip-memory --json $OUT/varlen-$side.json 2>&1 | grep -v "UserWarning\|_warn_once" | tail -25 | tee -a $OUT/bench.log
  say "$side varlen timed"
done
for side in before after before; do
  lib=$B/libad_bench.so; [[ $side == before ]] && lib=/tmp/bs-before/libad_bench.so
  echo "== $side dense" | tee -a $OUT/bench.log
  timeout 70 python3 bench/results/fwd-ncu-h100-2026-11-27/profile_fwd.py --lib $lib --time 20 --heads 16 2>&1 |
    grep -v "UserWarning\|_warn_once" | tee -a $OUT/bench.log
  say "$side dense timed"
done
