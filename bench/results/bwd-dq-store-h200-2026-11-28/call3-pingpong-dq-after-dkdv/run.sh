#!/usr/bin/env bash
# backward ping-pong (warp-specialised kernel, d64 and d128): tests, dense/varlen before vs after, memcheck
set -uo pipefail
export OUT PATH=$PWD/.device/bin:$PATH
bash bench/gpu/bwd_ws.sh --deps .device/deps --head-dims '64 128' --tokens '16384 65536' \
  --tests '*backward*,cuda sweep: CUDA and CPU backends agree on the training sweep' --budget 330 \
  --before-flags '-DATTN_DOCTOR_BWD_WS_PINGPONG=0' --after-flags '-DATTN_DOCTOR_BWD_WS_D64=1' 2>&1 | tee $OUT/run.log
echo "== memcheck"
(cd /tmp/build-bws-after && ATTN_DOCTOR_SANITIZER=memcheck /usr/bin/timeout 150 compute-sanitizer --tool memcheck --print-limit 20 \
  ./tests/attn_doctor_tests "*backward*" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?")
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -4
cd $OUT && tar czf all.tgz *.log *.json *.txt 2>/dev/null; rm -f dense-*.json varlen-*.json build.log varlen.log dense.log
