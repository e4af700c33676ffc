#!/bin/bash
# Call 1: the forward's timing (this tree vs the pre-interior-load configuration) and the
# backward's small launches (this tree vs the header before the preprocess change).
set -u
R=$(pwd); D=$R/.device/deps; O=$OUT
t0=$SECONDS
mkdir -p $O/fwd $O/bwdpre
rm -rf /tmp/fwdtree && mkdir -p /tmp/fwdtree && tar --exclude=./.device --exclude=./.git --exclude=./build --exclude="./build-*" -cf - . | tar -xf - -C /tmp/fwdtree
(cd /tmp/fwdtree && OUT=$O/fwd timeout 300 bash $R/.device/fwd_time.sh $D > $O/fwd/run.log 2>&1); echo "fwd rc=$? at $((SECONDS-t0)) s"
tail -60 $O/fwd/run.log
OUT=$O/bwdpre ATTN_DOCTOR_DEPS=$D timeout 250 bash bench/gpu/bench_bwd_preprocess.sh --before .device/bwd-before.cuh --tokens 8192 16384 --head-dims 64 128 > $O/bwdpre/run.log 2>&1; echo "bwdpre rc=$? at $((SECONDS-t0)) s"
tail -40 $O/bwdpre/run.log
