#!/usr/bin/env bash
# The guard's GPU measurements in one command on the accelerator machine: builds and installs
# attn-doctor's Python package there (pip, no network: the machine's scikit-build-core and
# nanobind; CPU-only build, the guard needs no CUDA backend), then runs bench/gpu/guard_gpu.py
# (a real device-side assert stopped by the guard; the cost in a training step).
#   scripts/stage-deps .device/deps                # here, once: the header-only dependencies
#   bash bench/gpu/guard_gpu.sh [--deps DIR] [--quick] [--skip-b]
# DIR (default .device/deps, or $ATTN_DOCTOR_DEPS) holds what scripts/stage-deps copies; the
# machine lacks Debian's dev packages. Results go to $OUT (else bench/results/local):
# guard-gpu.json, guard-gpu.md, guard-cuda.json, guard-build.log. Exit status: guard_gpu.py's.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps=${ATTN_DOCTOR_DEPS:-$root/.device/deps}
out=${OUT:-$root/bench/results/local}
python=${PYTHON:-python3}
args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --deps) deps=$2; shift 2 ;;
    --quick|--skip-b) args+=("$1"); shift ;;
    *) echo "guard_gpu.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
work=$(mktemp -d)
[[ -d $deps ]] || { echo "guard_gpu.sh: no dependency folder $deps (scripts/stage-deps DIR, then carry it)" >&2; exit 2; }
deps=$(cd "$deps" && pwd)
echo "== building the package ($($python --version 2>&1)), log: $out/guard-build.log"
start=$SECONDS
if ! CMAKE_PREFIX_PATH=$deps CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
     "$python" -m pip install --no-build-isolation --no-deps --target "$work/site" \
       -C cmake.define.ATTN_DOCTOR_CUDA=OFF -C build-dir="$work/build" "$root" >"$out/guard-build.log" 2>&1; then
  tail -n 60 "$out/guard-build.log"
  echo "guard_gpu.sh: the package did not build" >&2
  exit 1
fi
echo "== built in $((SECONDS - start)) s"
PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH} "$python" -c \
  'import attn_doctor, attn_doctor._native; print("attn_doctor", attn_doctor.__version__, "from", attn_doctor.__file__)' || exit 1
PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH} OUT=$out "$python" "$root/bench/gpu/guard_gpu.py" --out "$out" "${args[@]}"
