#!/bin/bash
# The two-launch comparison test (needs the one-launch forms: -DATTN_DOCTOR_FWD_ONE_LAUNCH), its
# memcheck, then the checked ops on the GPU (bench/gpu/ops_gpu.sh --no-tests).
set -u
D=$(cd "$(dirname "$0")" && pwd); R=$(cd "$D/.." && pwd); cd $R
t0=$SECONDS
B=/tmp/b1
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=80;90" -DCMAKE_CUDA_FLAGS=-DATTN_DOCTOR_FWD_ONE_LAUNCH -DCMAKE_PREFIX_PATH=$D/deps \
  -Dnlohmann_json_DIR=$D/deps/share/cmake/nlohmann_json -DCLI11_DIR=$D/deps/share/cmake/CLI11 \
  -DCatch2_DIR=$D/deps/lib/cmake/Catch2 -Dfmt_DIR=$D/deps/lib/x86_64-linux-gnu/cmake/fmt \
  -Dspdlog_DIR=$D/deps/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
ninja -C $B -j 16 attn_doctor_tests > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "built in $((SECONDS - t0)) s"
T="cuda: the checked forward in two launches writes what it writes in one"
$B/tests/attn_doctor_tests "$T" 2>&1 | tail -4
echo "test done at $((SECONDS - t0)) s"
compute-sanitizer --tool memcheck --print-limit 5 $B/tests/attn_doctor_tests "$T" 2>&1 | tail -3
echo "memcheck done at $((SECONDS - t0)) s"
OUT=$OUT bash bench/gpu/ops_gpu.sh --deps $D/deps --no-tests > /tmp/ops.log 2>&1; echo "ops rc=$? at $((SECONDS - t0)) s"
tail -30 /tmp/ops.log
