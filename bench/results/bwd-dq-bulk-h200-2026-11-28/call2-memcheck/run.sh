#!/usr/bin/env bash
# memcheck of the backward GPU tests and the training batches, on a build of this tree (sm_90a)
set -uo pipefail
deps=$PWD/.device/deps b=/tmp/build-mc t0=$SECONDS
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_DOCTOR_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  "-DCMAKE_PREFIX_PATH=$deps" "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json" \
  "-DCLI11_DIR=$deps/share/cmake/CLI11" "-DCatch2_DIR=$deps/lib/cmake/Catch2" \
  "-Dfmt_DIR=$deps/lib/x86_64-linux-gnu/cmake/fmt" "-Dspdlog_DIR=$deps/lib/x86_64-linux-gnu/cmake/spdlog" > $OUT/build.log 2>&1 &&
ninja -C $b -j 16 attn_doctor_tests attn-doctor >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "== built at $((SECONDS - t0)) s"
for f in bench/gpu/training/*.json repro_cases/*train*.json; do
  [[ -f $f ]] || continue
  (timeout 300 compute-sanitizer --tool memcheck --print-limit 5 $b/attn-doctor check $f --backend cuda -q > $OUT/mc-$(basename $f).log 2>&1; echo "$f: $(grep 'ERROR SUMMARY' $OUT/mc-$(basename $f).log)") &
done
(cd $b && ATTN_DOCTOR_SANITIZER=memcheck timeout 330 compute-sanitizer --tool memcheck --print-limit 20 ./tests/attn_doctor_tests "*backward*" --durations yes > $OUT/mc-tests.log 2>&1; echo "tests rc=$?")
wait
grep -E "ERROR SUMMARY|passed|failed" $OUT/mc-tests.log | tail -5
echo "== done at $((SECONDS - t0)) s"
cd $OUT && tar czf mc.tgz *.log
