#!/bin/bash
# The d128 backward's spill cut on the H100, in one device call: this tree built once (sm_90 /
# sm_90a, the Catch2 tests), then libad_bench.so linked four times, the archive's bf16 wgmma
# backward object (kernels/sm90a/varlen_attention_bwd_wgmma_bf16.cu) swapped for one compiled
# beforehand with the build's own nvcc flags (objs/*.o):
#   before  main's source (the parent commit)         after  this tree (the default build)
#   ws24    this tree, -DATTN_DOCTOR_BWD_WGMMA_WS=1   ws40   the same, producer at 40 registers
# Then the backward's GPU tests on "after" and on "ws24" (its fp16 object swapped too, the test
# binary relinked), and bench_backward.py per side: dense vs cuDNN and FA2, varlen vs FA2.
# Run from the staged tree's root (scripts/gpu-check --stage), objects in objs/:
#   OUT=<dir> bash bench/results/bwd-spill-h100-2026-11-27/verify.sh
set -u
R=$(pwd); D=$R/deps; B=/tmp/bs; t0=$SECONDS
el() { echo "[$((SECONDS - t0)) s] $*"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'
  nvcc --version | tail -1; head -1 .gpu-check-commit; } > $OUT/gpu.txt 2>&1
cmake -S . -B $B -G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json \
  -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt \
  -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
ninja -C $B -j 16 attn_doctor_tests attn_doctor_cuda attn_doctor_core > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
cudart=$(dirname $(command -v nvcc))/../lib64
cuda_a=$(find $B -name libattn_doctor_cuda.a); core_a=$(find $B -name libattn_doctor_core.a)
obj_dir=$B/CMakeFiles/attn_doctor_cuda_sm90a.dir/kernels/sm90a
link() {  # side, archive
  g++ -std=c++20 -O2 -shared -fPIC -o /tmp/$1.so bench/gpu/capi.cpp -Ikernels -Ilib -I$D/include -I$cudart/../include \
    -Wl,--no-undefined $2 $core_a $2 -L$cudart -lcudart_static -ldl -lrt -lpthread
}
link after $cuda_a || exit 1
for side in before ws24 ws40; do
  rm -rf /tmp/sw; mkdir -p /tmp/sw; cp $cuda_a /tmp/lib-$side.a
  cp objs/$side.o /tmp/sw/varlen_attention_bwd_wgmma_bf16.cu.o
  (cd /tmp/sw && ar r /tmp/lib-$side.a varlen_attention_bwd_wgmma_bf16.cu.o) && link $side /tmp/lib-$side.a || exit 1
done
el linked
spec=("*backward*" "[cuda]" "~[cuda-sweep]")
timeout 120 $B/tests/attn_doctor_tests "${spec[@]}" > $OUT/tests-after.log 2>&1; el "tests after rc=$?"; tail -2 $OUT/tests-after.log
export PYTHONPATH=$R/python PYTHONUNBUFFERED=1
bb() { python3 bench/gpu/bench_backward.py "$@" 2>&1 | grep -E '^(dense|bwd|VERIF|all|SOME|Traceback|cuDNN|[A-Za-z]*Error)'; }
room() { (( SECONDS - t0 < $1 )) || { el "skipped: $2"; return 1; }; }  # seconds spent < limit
dense() { echo "-- $1 dense" | tee -a $OUT/bench.log
  timeout 90 bash -c "$(declare -f bb); bb --lib /tmp/$1.so --dense --head-dims $2 --json $OUT/dense-$1.json" | tee -a $OUT/bench.log
  el "dense $1"; }
varlen() { echo "-- $1 varlen" | tee -a $OUT/bench.log
  timeout 60 bash -c "$(declare -f bb); bb --lib /tmp/$1.so --head-dims 128 --tokens 16384 65536 --json $OUT/varlen-$1.json" | tee -a $OUT/bench.log
  el "varlen $1"; }
dense before "64 128"; dense after "64 128"; varlen before; varlen after
for side in ws24 ws40; do room 330 "dense $side" && dense $side 128; done
for side in ws24 ws40; do room 360 "varlen $side" && varlen $side; done
room 400 "tests ws24" || exit 0
# the warp-specialised kernel's tests: its bf16 and fp16 objects in the build, the tests relinked
cp objs/ws24.o $obj_dir/varlen_attention_bwd_wgmma_bf16.cu.o && cp objs/ws24_fp16.o $obj_dir/varlen_attention_bwd_wgmma_fp16.cu.o &&
  ninja -C $B attn_doctor_tests > /tmp/relink.log 2>&1 || { tail -20 /tmp/relink.log; exit 1; }
grep -c "Building" /tmp/relink.log
timeout 100 $B/tests/attn_doctor_tests "${spec[@]}" > $OUT/tests-ws24.log 2>&1; el "tests ws24 rc=$?"; tail -2 $OUT/tests-ws24.log
