#!/bin/bash
# One device call: build this tree (sm_90 / sm_90a) and, beside it, "before" (main's kernels/
# and lib/ in .device/before, the rest of this tree), the forward's GPU tests, the producer's
# SASS (cuobjdump), then the dense d128 forward against cuDNN (profile_fwd.py --time) and the
# varlen forward against FA2 (bench_kernels.py), before and after, one after the other.
# From the staged tree's root, with scripts/stage-deps' prefix in deps/:
#   OUT=<dir> bash bench/results/fwd-tma-h100-2026-11-27/run.sh
set -u
R=$(pwd); D=$R/deps; B=/tmp/b-tma; P=/tmp/before-src; t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/env.txt
CFG="-G Ninja -DATTN_DOCTOR_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D -Dnlohmann_json_DIR=$D/share/cmake/nlohmann_json
  -DCLI11_DIR=$D/share/cmake/CLI11 -DCatch2_DIR=$D/lib/cmake/Catch2 -Dfmt_DIR=$D/lib/x86_64-linux-gnu/cmake/fmt
  -Dspdlog_DIR=$D/lib/x86_64-linux-gnu/cmake/spdlog"
cudart=$(dirname $(command -v nvcc))/../lib64
capi() {  # $1 build dir, $2 source root
  g++ -std=c++20 -O2 -shared -fPIC -o $1/libad_bench.so $2/bench/gpu/capi.cpp -I$2/kernels -I$2/lib -I$D/include \
    -I$cudart/../include -Wl,--no-undefined $(find $1 -name libattn_doctor_cuda.a) $(find $1 -name libattn_doctor_core.a) \
    $(find $1 -name libattn_doctor_cuda.a) -L$cudart -lcudart_static -ldl -lrt -lpthread
}
rm -rf $P; mkdir -p $P; cp -r CMakeLists.txt app bench python tests tools scripts docs repro_cases $P/ 2>/dev/null
rm -rf $P/kernels $P/lib; cp -r .device/before/kernels .device/before/lib $P/
rm -f $P/tests/test_kernel_params.cpp  # this tree's tests are not built there
( cmake -S $P -B /tmp/b-before $CFG > /tmp/cfg-b.log 2>&1 && nice ninja -C /tmp/b-before -j 16 attn_doctor_cuda attn_doctor_core \
    > /tmp/build-b.log 2>&1 && capi /tmp/b-before $P && echo "before built at $((SECONDS - t0)) s" ) &
cmake -S . -B $B $CFG > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
ninja -C $B -j 16 attn_doctor_cuda attn_doctor_core > /tmp/build.log 2>&1 || { grep -B2 -A12 error /tmp/build.log | head -60; exit 1; }
capi $B . || exit 1
echo "lib built at $((SECONDS - t0)) s"
ninja -C $B -j 16 attn_doctor_tests > /tmp/build-t.log 2>&1 || { grep -B2 -A12 error /tmp/build-t.log | head -60; exit 1; }
echo "tests built at $((SECONDS - t0)) s"
o=$(find $B -name "varlen_attention_wgmma_ws_bf16.cu.o" | head -1)
cuobjdump -sass $o > /tmp/ws.sass 2>&1
python3 - > $OUT/sass.txt <<'PY'
import re
cur = None; counts = {}
for line in open("/tmp/ws.sass"):
    m = re.search(r"Function : (\S+)", line)
    if m: cur = m.group(1); counts[cur] = {}; continue
    if cur is None: continue
    for op in ("UTMALDG", "UTMAPF", "LDGSTS", "STL", "LDL", "HGMMA", "SYNCS"):
        if re.search(r"\b" + op + r"\b", line): counts[cur][op] = counts[cur].get(op, 0) + 1
for f, c in counts.items(): print(f, c)
PY
cat $OUT/sass.txt
timeout 150 $B/tests/attn_doctor_tests "cuda: the warp-specialised*","cuda: the checked forward in two launches*",\
"cuda: the wgmma and mma.sync kernels*","cuda: varlen forward matches fp64*","cuda: an overshooting cu_seqlens is*",\
"cuda: the single-query GQA*","kernel params:*" > $OUT/tests.log 2>&1; echo "tests rc=$?"; tail -3 $OUT/tests.log
echo "tests done at $((SECONDS - t0)) s"
wait
export PYTHONPATH=$R/python PYTHONUNBUFFERED=1
timeout 40 python3 bench/results/fwd-tma-h100-2026-11-27/graph_check.py --lib $B/libad_bench.so 2>&1 | tee $OUT/graph.log
for side in before after; do
  lib=$B/libad_bench.so; [[ $side == before ]] && lib=/tmp/b-before/libad_bench.so
  [[ -f $lib ]] || { echo "no $side library"; tail -20 /tmp/build-b.log; continue; }
  echo "-- $side" | tee -a $OUT/bench.log
  timeout 100 python3 bench/results/fwd-ncu-h100-2026-11-27/profile_fwd.py --lib $lib --time 20 --heads 16 2>&1 |
    grep -v timeline | tee -a $OUT/bench.log
  timeout 70 python3 bench/gpu/bench_kernels.py --lib $lib --head-dims 128 --tokens 16384 65536 --skip-memory --reps 10 \
    --json $OUT/varlen-$side.json 2>&1 | grep -vE "^ *$" | tail -12 | tee -a $OUT/bench.log
  echo "$side done at $((SECONDS - t0)) s"
done
