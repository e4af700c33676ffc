#!/usr/bin/env bash
# attn_doctor.ops on the accelerator machine, in one command: builds the extension with the
# CUDA kernels (sm_90 and sm_90a only: an H100 / H200), runs the package's ops tests there
# (CPU twin, the machine's torch and transformers), then bench/gpu/ops_gpu.py (CUDA: checks,
# policies, row counters, CUDA graph, torch.compile, per-call cost).
#   scripts/stage-deps .device/deps                # here, once: the header-only dependencies
#   bash bench/gpu/ops_gpu.sh [--deps DIR] [--baseline DIR] [--catch] [--no-tests]
# --baseline DIR: DIR holds an earlier commit's python/ and bench/gpu/ops_gpu.py (`git archive
#   COMMIT python bench/gpu | tar -x -C DIR`); its python/native.cpp is built in the same build
#   folder after this tree's (only that file recompiles) and its ops_gpu.py timing runs on the
#   same GPU, rows=True and rows=False: baseline-timing.json.
# --catch: bench/ops_catch_table.py --device cuda as well (ops-catch.json).
# --no-tests: leave out the CPU ops tests (they need no GPU).
# --build-only: build the extension and stop (bench/gpu/train_step_gpu.sh builds it this way).
# Results go to $OUT (else bench/results/local): ops-gpu.json, ops-gpu.log, ops-build.log,
# ops-tests.log, gpu.txt.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps=${ATTN_DOCTOR_DEPS:-$root/.device/deps}
out=${OUT:-$root/bench/results/local}
python=${PYTHON:-python3}
baseline="" catch=0 tests=1 build_only=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --deps) deps=$2; shift 2 ;;
    --baseline) baseline=$(cd "$2" && pwd); shift 2 ;;
    --catch) catch=1; shift ;;
    --no-tests) tests=0; shift ;;
    --build-only) build_only=1; shift ;;
    *) echo "ops_gpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
build=${BUILD:-/tmp/build-ops}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$out/gpu.txt" 2>&1
start=$SECONDS
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_DOCTOR_CUDA=ON -DATTN_DOCTOR_PYTHON=ON \
  -DPython_EXECUTABLE="$(command -v "$python")" -DCMAKE_CUDA_ARCHITECTURES=90 \
  "-DCMAKE_PREFIX_PATH=$deps" "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json" \
  "-DCLI11_DIR=$deps/share/cmake/CLI11" "-DCatch2_DIR=$deps/lib/cmake/Catch2" \
  "-Dfmt_DIR=$deps/lib/x86_64-linux-gnu/cmake/fmt" "-Dspdlog_DIR=$deps/lib/x86_64-linux-gnu/cmake/spdlog" \
  > "$out/ops-build.log" 2>&1 && ninja -C "$build" -j "$(nproc)" _native >> "$out/ops-build.log" 2>&1
rc=$?
echo "== build rc=$rc in $((SECONDS - start)) s"
[[ $rc -eq 0 ]] || { tail -n 40 "$out/ops-build.log"; exit 1; }
[[ $build_only -eq 1 ]] && exit 0
native=$build/python/attn_doctor
export ATTN_DOCTOR_NATIVE_DIR=$native PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
if [[ $tests -eq 1 ]]; then
  t=$SECONDS
  (cd "$root" && timeout 240 "$python" -m unittest python.tests.test_ops > "$out/ops-tests.log" 2>&1)
  echo "== CPU ops tests rc=$? in $((SECONDS - t)) s: $(tail -n 1 "$out/ops-tests.log")"
fi
t=$SECONDS
timeout 300 "$python" "$root/bench/gpu/ops_gpu.py" --out "$out" 2>&1 | tee "$out/ops-gpu.log"
status=${PIPESTATUS[0]}
echo "== ops_gpu.py rc=$status in $((SECONDS - t)) s"
if [[ $catch -eq 1 ]]; then
  t=$SECONDS
  (cd "$root" && timeout 180 "$python" bench/ops_catch_table.py --device cuda --json "$out/ops-catch.json" \
     > "$out/ops-catch.log" 2>&1)
  echo "== ops_catch_table.py --device cuda rc=$? in $((SECONDS - t)) s"
fi
if [[ -n $baseline ]]; then
  t=$SECONDS
  mkdir -p /tmp/ops-native-new && cp "$native"/_native*.so /tmp/ops-native-new/
  cp "$root/python/native.cpp" /tmp/ops-native-new.cpp
  cp "$baseline/python/native.cpp" "$root/python/native.cpp"
  ninja -C "$build" -j "$(nproc)" _native > "$out/ops-build-baseline.log" 2>&1
  rc=$?
  cp /tmp/ops-native-new.cpp "$root/python/native.cpp"
  mkdir -p /tmp/ops-baseline-native && cp "$native"/_native*.so /tmp/ops-baseline-native/
  cp /tmp/ops-native-new/_native*.so "$native"/  # this tree's extension back in place
  echo "== baseline extension rc=$rc in $((SECONDS - t)) s"
  if [[ $rc -eq 0 ]]; then
    (cd "$baseline" && ATTN_DOCTOR_NATIVE_DIR=/tmp/ops-baseline-native \
       PYTHONPATH=$baseline/python:$baseline/bench/gpu timeout 200 "$python" - "$out/baseline-timing.json" <<'EOF'
import json, sys
import ops_gpu
from attn_doctor import ops
counted, uncounted = {}, {}
ops_gpu.timing(counted)
ops.set_policy("step", rows=False)
ops_gpu.timing(uncounted)
json.dump({"rows=True": counted["timing"], "rows=False": uncounted["timing"]}, open(sys.argv[1], "w"), indent=1)
EOF
    ) > "$out/baseline.log" 2>&1
    echo "== baseline timing rc=$? in $((SECONDS - t)) s"
    tail -n 18 "$out/baseline.log"
  fi
fi
exit $status
