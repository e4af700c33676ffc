#!/usr/bin/env bash
# FlashAttention-4 on the GPU machine, over several calls on one warm machine (a CuTe DSL
# library wheel is larger than one call carries; docs/oracle.md#flashattention-4-on-an-h100):
#   bash tools/oracle/fa4_device.sh stage WHEELS_DIR                  # calls 1..n-1: parts to /tmp
#   bash tools/oracle/fa4_device.sh run WHEELS_DIR [runner options]   # the last call
# WHEELS_DIR holds the parts of the large wheels (`split -b 30M W W.part-`), the other wheels and
# releases.txt: one line per flash-attn-4 release, "<release> <quack_kernels wheel> <CuTe DSL
# version>". `run` reassembles the parts, installs each CuTe DSL version under /tmp/fa4/dsl-<v>
# and each release with its quack-kernels under /tmp/fa4/<release>, then runs the oracle cases
# that name the release (tools/oracle/runner.py --only), each case in its own process, one runner
# per release side by side; results under $OUT/<release>/. FA4_CASES (a grep -E pattern) keeps
# the case ids that match it.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STEP=$1 WHEELS=$(cd "$2" && pwd); shift 2
STAGE=/tmp/fa4-stage
mkdir -p "$STAGE"
cp "$WHEELS"/*.part-* "$STAGE"/ 2>/dev/null
ls -la "$STAGE"
[ "$STEP" = stage ] && exit 0
for first in "$STAGE"/*.part-aa; do
  whl=$(basename "$first" .part-aa)
  cat "$STAGE/$whl".part-* > "$STAGE/$whl" && sha256sum "$STAGE/$whl"
done
OUT=${OUT:-$REPO/fa4-out}
rm -rf /tmp/fa4 && mkdir -p /tmp/fa4 "$OUT"   # pip --target skips a top-level folder that exists
pipt() { python3 -m pip install --quiet --no-deps --no-index --target "$@"; }
t0=$(date +%s)
pipt /tmp/fa4/deps "$WHEELS"/apache_tvm_ffi-*.whl "$WHEELS"/torch_c_dlpack_ext-*.whl || exit 3
# the CuTe DSL's own dependencies, only where the device's Python lacks them (its torch may use them)
for dep in "cuda.bindings cuda_bindings" "cuda.pathfinder cuda_pathfinder" "google.protobuf protobuf" "einops einops"; do
  mod=${dep% *} name=${dep#* }
  python3 -c "import $mod" 2>/dev/null && echo "fa4: $mod from the device" || pipt /tmp/fa4/deps-extra "$WHEELS"/$name-*.whl || exit 3
done
declare -A DSL
while read -r rel quack dsl; do
  if [ -z "${DSL[$dsl]:-}" ]; then
    pipt "/tmp/fa4/dsl-$dsl" $(ls "$STAGE"/nvidia_cutlass_dsl*-"$dsl"-*.whl "$WHEELS"/nvidia_cutlass_dsl*-"$dsl"-*.whl 2>/dev/null) || exit 3
    # the DSL's `cutlass` package sits under nvidia_cutlass_dsl/{dsl,python}_packages, put on sys.path
    # by the .pth file its wheel installs; a --target directory is not a site directory, so name it
    DSL[$dsl]=$(ls -d /tmp/fa4/dsl-"$dsl"/nvidia_cutlass_dsl/*_packages | head -1)
  fi
  pipt "/tmp/fa4/$rel" "$WHEELS"/flash_attn_4-"$rel"-*.whl "$WHEELS/$quack" || exit 3
done < "$WHEELS/releases.txt"
echo "fa4: installed in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
export ORACLE_COMMAND="bash tools/oracle/fa4_device.sh run WHEELS $*"
pids=()
while read -r rel quack dsl; do
  ids=$(cd "$REPO" && grep -l "\"flash_attn_4\": \"$rel\"" tests/oracle/cases/oracle-fa4-*.json repro_cases/fa4-*.json \
        | xargs -n1 basename | sed 's/\.json$//' | grep -E "${FA4_CASES:-.}" | paste -sd, -)
  [ -n "$ids" ] || continue
  path="/tmp/fa4/$rel:/tmp/fa4/dsl-$dsl:${DSL[$dsl]}:/tmp/fa4/deps:/tmp/fa4/deps-extra"
  PYTHONPATH="$path" python3 -c "import flash_attn.cute, importlib.metadata as m; \
print('$rel', m.version('flash-attn-4'), m.version('nvidia-cutlass-dsl'), m.version('quack-kernels'))" \
    > "$OUT/import-$rel.log" 2>&1
  (cd "$REPO" && PYTHONPATH="$path" python3 tools/oracle/runner.py --out "$OUT/$rel" --only "$ids" "$@" \
     > "$OUT/runner-$rel.log" 2>&1) &
  pids+=($!)
done < "$WHEELS/releases.txt"
for p in "${pids[@]}"; do wait "$p"; done
cat "$OUT"/import-*.log; tail -n 3 "$OUT"/runner-*.log
