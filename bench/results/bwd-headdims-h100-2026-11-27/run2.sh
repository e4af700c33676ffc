#!/bin/bash
# The GPU backward tests of head dims 192 / 256 (and the tests the refactor touched), each
# section or test case in its own process, on the build run.sh left in /tmp/build-bwd.
set -u
T=/tmp/build-bwd/tests/attn_doctor_tests
[[ -x $T ]] || { echo "no build"; exit 3; }
t0=$SECONDS
mkdir -p $OUT/t2
i=0
for e in bf16 fp16; do for d in 192 256; do
  for s in "plain $e d$d" "plain $e d$d causal" "GQA, len_q != len_k $e d$d causal" "window $e d$d" "softcap $e d$d" "deterministic, MQA $e d$d"; do
    i=$((i+1)); (timeout 60 $T "cuda: varlen backward matches fp64 gradients" -c "$s" > $OUT/t2/fp64-$i.log 2>&1; echo "rc=$? $s" >> $OUT/t2/fp64-$i.log) &
  done; done; done
j=0
for tc in "cuda: checked and unchecked backward compute the same gradients" "cuda: an overshooting cu_seqlens_q is recorded by the backward, never performed" "cuda: an overshooting cu_seqlens_k is recorded as k / v reads and dk / dv writes" "cuda: the backward's launch refuses shapes without a kernel"; do
  j=$((j+1)); (timeout 60 $T "$tc" > $OUT/t2/case-$j.log 2>&1; echo "rc=$? $tc" >> $OUT/t2/case-$j.log) &
done
wait
for f in $OUT/t2/*.log; do echo "$(tail -n 1 $f) | $(grep -E 'All tests passed|test cases:' $f | head -1)"; done
grep -l "FAILED" $OUT/t2/*.log | head; grep -h -A10 "FAILED" $OUT/t2/*.log | head -40
echo "== total $((SECONDS - t0)) s"
