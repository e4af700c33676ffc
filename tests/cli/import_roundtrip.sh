#!/usr/bin/env bash
# attn-doctor import, then check on what it wrote: the verdict each dump should get.
#  - dump-1311: the varlen arguments of a Dao-AILab/flash-attention#1311-style repro as .npy
#    (12288 sequences, 16 heads of 128, fp16, causal=False, the backward): long cu_seqlens go to
#    side .npy files through cu_seqlens_file / cu_seqlens_k_file; every invariant holds.
#  - dump-1311-short: the same with max_seqlen_q below the longest segment: max_seqlen.covers.
#  - small: q/k/v/dout headers give heads, head_dim, dtype and a training step; an int64
#    cu_seqlens_q gives cu_seqlens.dtype.
#  - record-npu44: a per-call record in the form MinghuasLab/flash-attention-npu#44 shows:
#    every invariant holds; records-two-calls --call 1 (int64 cu_seqlens): cu_seqlens.dtype.
#  - a value the loader refuses (cu_seqlens past 2^62): exit 2, and nothing is left written.
# Usage: import_roundtrip.sh /path/to/attn-doctor   (from the repository root)
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
D=tests/data/import

# run NAME EXPECTED_FIRST_VIOLATION IMPORT-ARGS...  (EXPECTED "none": every invariant holds)
run() {
  local name=$1 want=$2
  shift 2
  if ! "$bin" import "$@" -o "$dir/$name.json" --format json >"$dir/$name.report" 2>"$dir/$name.err"; then
    echo "$name: import failed"; cat "$dir/$name.err"; fail=1; return
  fi
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$dir/$name.report" || { echo "$name: report is not JSON"; fail=1; }
  "$bin" check "$dir/$name.json" --backend none --format json >"$dir/$name.check" 2>"$dir/$name.check.err"
  local rc=$?
  local first
  first=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); f = r.get("first_violation"); print(f["id"] if f else "none")' "$dir/$name.check" 2>/dev/null)
  if [[ $first != "$want" ]]; then
    echo "$name: first violation $first (exit $rc), expected $want"; head -c 2000 "$dir/$name.check.err"; fail=1
  fi
}

run dump-1311 none $D/dump-1311/*.npy --num-heads 16 --head-dim 128 --dtype fp16 --causal false --pass training
[[ -f $dir/dump-1311.cu_seqlens_q.npy && -f $dir/dump-1311.cu_seqlens_k.npy ]] || { echo "dump-1311: no side files"; fail=1; }
grep -q '"cu_seqlens_k_file": "dump-1311.cu_seqlens_k.npy"' "$dir/dump-1311.json" || { echo "dump-1311: no cu_seqlens_k_file"; fail=1; }
grep -q '"varlen.max_seqlen_q"' "$dir/dump-1311.report" || { echo "dump-1311: max_seqlen_q not mapped"; fail=1; }
run dump-1311-short max_seqlen.covers $D/dump-1311-short/*.npy --num-heads 16 --head-dim 128 --dtype fp16 --causal false --pass training
run small cu_seqlens.dtype $D/small/*.npy
grep -q '"num_kv_heads": 2' "$dir/small.json" && grep -q '"pass": "training"' "$dir/small.json" && grep -q '"dtype": "fp16"' "$dir/small.json" ||
  { echo "small: heads, pass or dtype not taken from the headers"; cat "$dir/small.json"; fail=1; }
grep -q '"key": "model.causal"' "$dir/small.report" || { echo "small: the causal default is not reported"; fail=1; }
run record-npu44 none $D/record-npu44.json
grep -q 'npu:0' "$dir/record-npu44.report" || { echo "record-npu44: the npu device is not reported as not mapped"; fail=1; }
grep -q '"head_dim": 96' "$dir/record-npu44.json" || { echo "record-npu44: head_dim"; fail=1; }
run two-calls cu_seqlens.dtype $D/records-two-calls.json --call 1
run two-calls-0 none $D/records-two-calls.json --call 0

# call-site keywords as passed (a record of ours with FA3's keywords): window_size, pack_gqa, num_splits
python3 - "$D/record-npu44.json" "$dir/in-window.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["keyword_args"].update({"window_size": [127, 0], "pack_gqa": True, "num_splits": 1, "softmax_scale": 0.1})
json.dump(r, open(sys.argv[2], "w"))
PY
run record-window none "$dir/in-window.json"
python3 - "$dir/record-window.json" "$dir/record-window.report" <<'PY' || fail=1
import json, sys
keys = {m["key"] for m in json.load(open(sys.argv[2]))["mapped"]}
why = [n["input"] for n in json.load(open(sys.argv[2]))["not_mapped"]]
missing = {"varlen.window_size", "varlen.pack_gqa", "varlen.num_splits", "varlen.binding"} - keys
if missing or not any("softmax_scale" in w for w in why):
    print("record-window: not mapped as expected:", missing, why)
    sys.exit(1)
PY

# a value only the loader refuses: exit 2 naming the written file's JSON path, and no file left
"$bin" import cu_seqlens_q=tests/data/hostile/import/cu-past-2-62.npy --num-heads 4 --head-dim 8 -o "$dir/refused.json" \
  >/dev/null 2>"$dir/refused.err"
rc=$?
[[ $rc == 2 ]] || { echo "refused: exit $rc, expected 2"; fail=1; }
grep -q "/varlen/cu_seqlens_q" "$dir/refused.err" || { echo "refused: message lacks the JSON path"; cat "$dir/refused.err"; fail=1; }
[[ ! -e $dir/refused.json ]] || { echo "refused: the batch file was left behind"; fail=1; }
exit $fail
