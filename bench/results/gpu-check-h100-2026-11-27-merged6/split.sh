#!/bin/bash
# gpu-check's forward lane split over two device calls: PART=a (build, ctest, SASS, sweep,
# corpus, --raw) or PART=b (memcheck, with the build kept from part a in .gpubuild).
set -u
D=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$D/.." && pwd)
O=/tmp/merged-$PART; mkdir -p $O
t0=$SECONDS
cd $R
flag=--no-memcheck; [[ $PART == b ]] && flag=--memcheck-only
ATTN_DOCTOR_COMMIT=$COMMIT timeout ${LIMIT:-570} scripts/gpu-check --deps $D/deps --out $O/fwd --build $R/.gpubuild --jobs 16 --no-bench --no-ncu $flag > $O/fwd.log 2>&1
echo "part $PART rc=$? at $((SECONDS - t0)) s"
cp $O/fwd/gpu-check.md $OUT/gpu-check-$PART.md 2>/dev/null
cp $O/fwd/details.log $OUT/details-$PART.log 2>/dev/null
grep '^|' $O/fwd/gpu-check.md | cut -c1-400
tail -c 2000 $O/fwd.log
