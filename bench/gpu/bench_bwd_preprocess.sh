#!/usr/bin/env bash
# The backward's small launches (preprocess, dq conversion, group sum) timed alone at the
# training step's shapes, this tree against an earlier varlen_attention_bwd.cuh on the same GPU
# in one command: builds the extension (bench/gpu/ops_gpu.sh --build-only) for this tree and,
# with --before FILE, for a copy of this tree whose kernels/varlen_attention_bwd.cuh is FILE
# (`git show COMMIT:kernels/varlen_attention_bwd.cuh > .device/bwd-before.cuh`, here), then runs
# bench/gpu/bench_bwd_preprocess.py on each, alternating, twice.
#   OUT=<dir> bash bench/gpu/bench_bwd_preprocess.sh [--before FILE] [bench_bwd_preprocess.py args]
# Results in $OUT: {before,after}-{1,2}.json, bwd-preprocess.log, build logs, gpu.txt.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/bench/results/local}
python=${PYTHON:-python3}
before=""
if [[ ${1:-} == --before ]]; then before=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2; fi
mkdir -p "$out"
OUT=$out/after-build BUILD=/tmp/build-bwdpre-after PYTHON=$python bash "$root/bench/gpu/ops_gpu.sh" --build-only || exit 1
cp "$out/after-build/gpu.txt" "$out/gpu.txt"
if [[ -n $before ]]; then
  copy=/tmp/bwdpre-before-tree
  rm -rf "$copy" && mkdir -p "$copy"
  (cd "$root" && tar --exclude=./.git --exclude=./build --exclude='./build-*' -cf - .) | tar -xf - -C "$copy"
  cp "$before" "$copy/kernels/varlen_attention_bwd.cuh"
  OUT=$out/before-build BUILD=/tmp/build-bwdpre-before PYTHON=$python bash "$copy/bench/gpu/ops_gpu.sh" --build-only || exit 1
fi
status=0
run() {  # label build-dir python-dir args...
  local label=$1 build=$2 py=$3 rep=$4
  shift 4
  ATTN_DOCTOR_NATIVE_DIR=$build/python/attn_doctor PYTHONPATH=$py${PYTHONPATH:+:$PYTHONPATH} \
    timeout 300 "$python" "$root/bench/gpu/bench_bwd_preprocess.py" --label "$label" --json "$out/$label-$rep.json" "$@" \
    || status=1
}
{
  for rep in 1 2; do
    [[ -n $before ]] && run before /tmp/build-bwdpre-before /tmp/bwdpre-before-tree/python $rep "$@"
    run after /tmp/build-bwdpre-after "$root/python" $rep "$@"
  done
  echo "== bench_bwd_preprocess rc=$status"
  exit $status
} 2>&1 | tee "$out/bwd-preprocess.log"
exit "${PIPESTATUS[0]}"
