#!/bin/bash
# After the last merge (launcher host code changed): build, the GPU tests (no sweep), the corpus on CUDA.
set -u
D=$(cd "$(dirname "$0")" && pwd); R=$(cd "$D/.." && pwd); cd $R
t0=$SECONDS
B=/tmp/b3
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=80;90" -DCMAKE_CUDA_FLAGS=-DATTN_DOCTOR_FWD_ONE_LAUNCH -DCMAKE_PREFIX_PATH=$D/deps \
  -Dnlohmann_json_DIR=$D/deps/share/cmake/nlohmann_json -DCLI11_DIR=$D/deps/share/cmake/CLI11 \
  -DCatch2_DIR=$D/deps/lib/cmake/Catch2 -Dfmt_DIR=$D/deps/lib/x86_64-linux-gnu/cmake/fmt \
  -Dspdlog_DIR=$D/deps/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
ninja -C $B -j 16 attn_doctor_tests attn-doctor > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "built in $((SECONDS - t0)) s; commit $(git rev-parse --short HEAD 2>/dev/null)"
timeout 200 $B/tests/attn_doctor_tests "[cuda]" "~[cuda-sweep]" 2>&1 | tail -3
echo "tests done at $((SECONDS - t0)) s"
timeout 150 $B/attn-doctor repro repro_cases --backend cuda 2>&1 | tail -1
echo "corpus done at $((SECONDS - t0)) s"
