#!/usr/bin/env bash
# the checked backward's key-block check on the walk the kernel computes anyway: before (main) / after
# .device/main-src: `git archive 84c9c78 | tar x -C .device/main-src` (main before the change), carried with .device/deps
set -uo pipefail
export OUT
bash bench/gpu/bwd_ws.sh --deps .device/deps --before-src .device/main-src --head-dims '64 128' --tokens '16384 65536' \
  --tests '*backward*' --budget 330 --before-flags '' --after-flags '' 2>&1 | tee $OUT/run.log
echo "== ncu durations d64 16x2048"
export PYTHONPATH=$PWD/python
for side in before after; do
  timeout 100 ncu --clock-control none --csv --metrics gpu__time_duration.sum python3 bench/gpu/bench_backward.py \
    --lib /tmp/build-bws-$side/libad_bench.so --dense --dense-shapes 16x2048 --head-dims 64 --reps 1 --warmup 0 > $OUT/ncu-$side.csv 2>&1
  python3 - $OUT/ncu-$side.csv <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value")
agg = collections.OrderedDict()
for r in rows[1:]:
    k = re.sub(r"\(.*", "", r[ki])[:90]
    agg.setdefault(k, []).append(float(r[vi].replace(",", "")))
for k, v in agg.items(): print(f"{len(v):3d} x  {' '.join(f'{x/1000:.1f}' for x in v)} us  {k}")
PY
done
echo "== memcheck"
(cd /tmp/build-bws-after && ATTN_DOCTOR_SANITIZER=memcheck timeout 150 compute-sanitizer --tool memcheck --print-limit 20 \
  ./tests/attn_doctor_tests "*backward*" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?")
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -4
cd $OUT && tar czf all.tgz *.log *.json *.txt *.csv 2>/dev/null; rm -f dense-*.json varlen-*.json build.log varlen.log dense.log *.csv
