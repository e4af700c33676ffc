#!/usr/bin/env bash
# FlashAttention-4 on the GPU machine, over two calls on one warm machine (the CuTe DSL's
# library wheel is larger than one call carries; docs/oracle.md):
#   bash tools/oracle/fa4_device.sh stage WHEELS_DIR     # call 1: copies the first part to /tmp
#   bash tools/oracle/fa4_device.sh run WHEELS_DIR [runner options]   # call 2
# WHEELS_DIR holds nvidia_cutlass_dsl_libs_cu13-*.whl.part-* (split -b 50M), the other wheels
# (flash_attn_4-<release>-*.whl, quack_kernels-*.whl, ...) and releases.txt: one line per
# flash-attn-4 release, "<release> <quack_kernels wheel>". `run` installs each release with its
# quack-kernels beside one shared CuTe DSL under /tmp/fa4, then runs the oracle cases that name
# that release (tools/oracle/runner.py --only), each case in its own process, one runner per
# release side by side; results under $OUT/<release>/.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STEP=$1 WHEELS=$(cd "$2" && pwd); shift 2
STAGE=/tmp/fa4-stage
mkdir -p "$STAGE"
if [ "$STEP" = stage ]; then
  cp "$WHEELS"/*.part-* "$STAGE"/ && ls -la "$STAGE"
  exit 0
fi
cp "$WHEELS"/*.part-* "$STAGE"/ 2>/dev/null
whl=$(ls "$STAGE"/*.part-aa | sed 's/\.part-aa$//')
cat "$STAGE"/$(basename "$whl").part-* > "$STAGE/$(basename "$whl")"
sha256sum "$STAGE/$(basename "$whl")"
OUT=${OUT:-$REPO/fa4-out}
mkdir -p /tmp/fa4/deps "$OUT"
t0=$(date +%s)
python3 -m pip install --quiet --no-deps --no-index --target /tmp/fa4/deps "$STAGE/$(basename "$whl")" \
  "$WHEELS"/nvidia_cutlass_dsl-*.whl "$WHEELS"/nvidia_cutlass_dsl_libs_base-*.whl "$WHEELS"/apache_tvm_ffi-*.whl \
  "$WHEELS"/torch_c_dlpack_ext-*.whl "$WHEELS"/einops-*.whl || exit 3
while read -r rel quack; do
  python3 -m pip install --quiet --no-deps --no-index --target "/tmp/fa4/$rel" "$WHEELS"/flash_attn_4-"$rel"-*.whl \
    "$WHEELS/$quack" || exit 3
done < "$WHEELS/releases.txt"
echo "fa4: installed in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
export ORACLE_COMMAND="bash tools/oracle/fa4_device.sh run WHEELS $*"
pids=()
while read -r rel quack; do
  ids=$(cd "$REPO" && grep -l "\"flash_attn_4\": \"$rel\"" tests/oracle/cases/oracle-fa4-*.json repro_cases/fa4-*.json \
        | xargs -n1 basename | sed 's/\.json$//' | paste -sd, -)
  [ -n "$ids" ] || continue
  PYTHONPATH="/tmp/fa4/$rel:/tmp/fa4/deps" python3 -c "import flash_attn.cute, importlib.metadata as m; \
print('$rel', m.version('flash-attn-4'), m.version('nvidia-cutlass-dsl'), m.version('quack-kernels'))" \
    > "$OUT/import-$rel.log" 2>&1
  (cd "$REPO" && PYTHONPATH="/tmp/fa4/$rel:/tmp/fa4/deps" python3 tools/oracle/runner.py --out "$OUT/$rel" \
     --only "$ids" "$@" > "$OUT/runner-$rel.log" 2>&1) &
  pids+=($!)
done < "$WHEELS/releases.txt"
for p in "${pids[@]}"; do wait "$p"; done
cat "$OUT"/import-*.log; tail -n 3 "$OUT"/runner-*.log
