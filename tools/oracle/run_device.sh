#!/usr/bin/env bash
# The oracle's one command on the GPU machine (tools/oracle/README.md):
#   bash tools/oracle/run_device.sh [runner options, e.g. --jobs 8 --deadline 500]
# with the carry folder made by tools/oracle/pack.py (.oracle-carry) next to the repository.
# Unpacks the carried upstream code under $ORACLE_STACK, then runs every case
# (tools/oracle/runner.py) writing $OUT/oracle.jsonl, $OUT/RUN.json and $OUT/oracle.log.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=${ORACLE_CARRY:-$REPO/.oracle-carry}
OUT=${OUT:-$REPO/oracle-out}
export ORACLE_STACK=${ORACLE_STACK:-/tmp/oracle-stack} ORACLE_CARRY=$CARRY
export ORACLE_COMMAND="bash tools/oracle/run_device.sh $*"
mkdir -p "$ORACLE_STACK" "$OUT"
[ -f "$CARRY/manifest.json" ] || { echo "no carry at $CARRY: run tools/oracle/pack.py and carry .oracle-carry" >&2; exit 2; }
for a in "$CARRY"/transformers-*.tar.xz; do tar -xJf "$a" -C "$ORACLE_STACK"; done
for w in "$CARRY"/wheels/*.whl; do
  v=$(basename "$w" | cut -d- -f2)                     # flash_linear_attention-0.1-... -> 0.1
  python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$w" "$ORACLE_STACK/fla-$v"
done
cp -r "$CARRY"/flash_attn-* "$ORACLE_STACK"/ 2>/dev/null
echo "oracle: stack unpacked under $ORACLE_STACK ($(ls "$ORACLE_STACK" | tr '\n' ' '))"
cd "$REPO" && python3 tools/oracle/runner.py --out "$OUT" "$@"
