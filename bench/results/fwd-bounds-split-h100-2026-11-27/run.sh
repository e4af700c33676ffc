#!/bin/bash
# The experiment of split-test.patch (the warp-specialised kernel's first-launch in-bounds test
# split over the warps), before and after, in one device call from the root of a copy of the tree:
#   OUT=<dir> bash bench/results/fwd-bounds-split-h100-2026-11-27/run.sh DEPS
# Builds the CUDA libraries and bench/gpu/capi.cpp (the tree as committed: "before"), applies the
# patch, rebuilds (the two warp-specialised .cu files) and links again ("after"), then times both
# with fwd-ncu-h100-2026-11-27/profile_fwd.py --time (before, after, before).
set -u
D=$(cd "$1" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=/tmp/b-split
R=bench/results/fwd-bounds-split-h100-2026-11-27
t0=$SECONDS
say() { echo "[$((SECONDS - t0)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D \
  -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 \
  -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/split-cmake.log 2>&1
cudart_dir="$(dirname "$(command -v nvcc)")/../lib64"
build() {
  ninja -C $B -j 16 attn_doctor_cuda attn_doctor_core > /tmp/split-build.log 2>&1 || { grep -B2 -A12 error /tmp/split-build.log | head -60; exit 1; }
  g++ -std=c++20 -O2 -shared -fPIC -o "$1" bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart_dir/../include \
    -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) $(find $B -name libattn_doctor_cuda.a) \
    -L$cudart_dir -lcudart_static -ldl -lrt -lpthread || exit 1
}
build $B/before.so; say "before built"
{ patch -p1 < $R/split-test.patch || git apply $R/split-test.patch; } || exit 1
build $B/after.so; say "after built"
for which in before after before; do
  echo "== $which"
  PYTHONUNBUFFERED=1 timeout 60 python3 bench/results/fwd-ncu-h100-2026-11-27/profile_fwd.py --lib $B/$which.so \
    --time 20 --heads 16 2>&1 | grep -v "UserWarning\|_warn_once"
  say "$which timed"
done 2>&1 | tee "$O/time.log"
{ patch -R -p1 < $R/split-test.patch || git apply -R $R/split-test.patch; }
