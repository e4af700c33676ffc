#!/usr/bin/env bash
# attn_doctor.ops on the accelerator machine, in one command: builds the extension with the
# CUDA kernels (sm_90 and sm_90a only: an H100 / H200), runs the package's ops tests there
# (CPU twin, the machine's torch and transformers), then bench/gpu/ops_gpu.py (CUDA: checks,
# policies, CUDA graph, torch.compile, readout cost).
#   scripts/stage-deps .device/deps                # here, once: the header-only dependencies
#   bash bench/gpu/ops_gpu.sh [--deps DIR]
# Results go to $OUT (else bench/results/local): ops-gpu.json, ops-build.log, ops-tests.log.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps=${ATTN_DOCTOR_DEPS:-$root/.device/deps}
out=${OUT:-$root/bench/results/local}
python=${PYTHON:-python3}
[[ ${1:-} == --deps ]] && deps=$2
mkdir -p "$out"
build=${BUILD:-/tmp/build-ops}
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
export ATTN_DOCTOR_NATIVE_DIR=$build/python/attn_doctor PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
t=$SECONDS
(cd "$root" && timeout 240 "$python" -m unittest python.tests.test_ops > "$out/ops-tests.log" 2>&1)
echo "== CPU ops tests rc=$? in $((SECONDS - t)) s: $(tail -n 1 "$out/ops-tests.log")"
t=$SECONDS
timeout 300 "$python" "$root/bench/gpu/ops_gpu.py" --out "$out"
rc=$?
echo "== ops_gpu.py rc=$rc in $((SECONDS - t)) s"
exit $rc
