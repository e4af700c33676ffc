#!/bin/bash
# The merged tree on the H100 in one device call: build (sm_90 / sm_90a), the backward benchmark
# (dense vs cuDNN and FA2, d64 / d128; varlen vs FA2, d128), the GPU tests (no sweep), the corpus
# on CUDA; "before": the parent commit's kernels (before the backward's chunk constant: its
# kernels/ and lib/ in .device/before), built beside it and timed in the same rounds.
# Run from the repository root with the build dependencies in .device/deps:
#   OUT=<dir> bash bench/results/gpu-check-h100-2026-11-27-merged7/verify.sh
set -u
R=$(pwd); D=$R/.device/deps; B=/tmp/b7; t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/gpu.txt
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json \
  -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt \
  -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
ninja -C $B -j 16 attn_doctor_tests attn-doctor attn_doctor_cuda attn_doctor_core > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
cudart=$(dirname $(command -v nvcc))/../lib64
# the parent's kernels: the same build over a copy of the tree with its kernels/ and lib/
P=/tmp/before-src; rm -rf $P; mkdir -p $P; cp -r CMakeLists.txt app bench python tests tools scripts docs repro_cases $P/ 2>/dev/null
cp -r .device/before/kernels .device/before/lib $P/
( cmake -S $P -B /tmp/b7-before -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json \
    -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt \
    -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/cfg-b.log 2>&1 &&
  nice ninja -C /tmp/b7-before -j 16 attn_doctor_cuda attn_doctor_core > /tmp/build-b.log 2>&1 &&
  g++ -std=c++20 -O2 -shared -fPIC -o /tmp/b7-before/libad_bench.so $P/bench/gpu/capi.cpp -I$P/kernels -I$P/lib -I$D/include \
    -I$cudart/../include -Wl,--no-undefined $(find /tmp/b7-before -name libattn_doctor_cuda.a) \
    $(find /tmp/b7-before -name libattn_doctor_core.a) $(find /tmp/b7-before -name libattn_doctor_cuda.a) -L$cudart \
    -lcudart_static -ldl -lrt -lpthread && echo "before built at $((SECONDS - t0)) s" ) &
g++ -std=c++20 -O2 -shared -fPIC -o $B/libad_bench.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart/../include \
  -Wl,--no-undefined $(find $B -name libattn_doctor_cuda.a) $(find $B -name libattn_doctor_core.a) \
  $(find $B -name libattn_doctor_cuda.a) -L$cudart -lcudart_static -ldl -lrt -lpthread || exit 1
echo "built in $((SECONDS - t0)) s"
timeout 170 $B/tests/attn_doctor_tests "[cuda]" "~[cuda-sweep]" > $OUT/tests.log 2>&1; echo "tests rc=$?"; tail -3 $OUT/tests.log
echo "tests done at $((SECONDS - t0)) s"
timeout 80 $B/attn-doctor repro repro_cases --backend cuda > $OUT/corpus.log 2>&1; echo "corpus rc=$?"; tail -1 $OUT/corpus.log
echo "corpus done at $((SECONDS - t0)) s"
wait
export PYTHONPATH=$R/python PYTHONUNBUFFERED=1
for side in before after; do
  lib=$B/libad_bench.so; [[ $side == before ]] && lib=/tmp/b7-before/libad_bench.so
  echo "-- $side" | tee -a $OUT/bench.log
  timeout 75 python3 bench/gpu/bench_backward.py --lib $lib --dense --head-dims 64 128 --reps 10 --json $OUT/dense-$side.json 2>&1 |
    grep -E '^(dense|VERIF|all|SOME|Traceback|cuDNN)' | tee -a $OUT/bench.log
  timeout 50 python3 bench/gpu/bench_backward.py --lib $lib --head-dims 128 --tokens 16384 65536 --reps 10 --json $OUT/varlen-$side.json 2>&1 |
    grep -E '^(bwd|VERIF|all|SOME|Traceback)' | tee -a $OUT/bench.log
done
echo "bench done at $((SECONDS - t0)) s"
