#!/usr/bin/env bash
# ncu of one checked d128 dense backward (16 x 2048, H = 16): our key-block kernel (source counters) and cuDNN's
set -uo pipefail
export OUT PATH=$PWD/.device/bin:$PATH
bash bench/gpu/bwd_ws.sh --deps .device/deps --head-dims 128 --budget 0 --before-flags '' --after-flags '' 2>&1 | tail -3
lib=/tmp/build-bws-after/libad_bench.so
export PYTHONPATH=$PWD/python
for k in varlen_bwd_wgmma_ws flash_bprop; do
  /usr/bin/timeout 200 ncu --set full --import-source no --kernel-name regex:$k --launch-count 1 -o $OUT/prof-$k \
    python3 bench/gpu/bench_backward.py --lib $lib --dense --dense-shapes 16x2048 --head-dims 128 --reps 1 --warmup 0 > $OUT/ncu-$k.log 2>&1
  echo "ncu $k rc=$?"; tail -2 $OUT/ncu-$k.log
  ncu --import $OUT/prof-$k.ncu-rep --page details > $OUT/details-$k.txt 2>&1
done
ncu --import $OUT/prof-varlen_bwd_wgmma_ws.ncu-rep --page source --print-source sass --csv > $OUT/sass.csv 2>&1
ls -la $OUT; gzip $OUT/sass.csv
cd $OUT && tar czf all.tgz details-*.txt ncu-*.log && rm -f details-*.txt ncu-*.log build.log
