#!/usr/bin/env bash
# `cmake --install BUILD --prefix PREFIX` gives a working PREFIX/bin/attn-doctor: it reports
# its version and diagnoses a repro case from a folder outside the source tree.
# Usage: cmake_install.sh BUILD_DIR PREFIX
set -euo pipefail
build=$1 prefix=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
bin=$prefix/bin/attn-doctor
[[ -x $bin ]] || { echo "FAIL: no executable $bin after cmake --install"; exit 1; }
want=$(sed -n 's/^project(attn_doctor VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
got=$("$bin" --version | head -n 1)
[[ $got == "attn-doctor $want" ]] || { echo "FAIL: --version printed '$got', expected 'attn-doctor $want'"; exit 1; }
case_file=$root/repro_cases/gemma2-4.44.0-sliding-window-generate.json
set +e
out=$(cd "$prefix" && "$bin" -q check "$case_file" --backend none)
rc=$?
set -e
[[ $rc == 1 && $out == "violation mask.rank" ]] || { echo "FAIL: exit $rc, stdout '$out' (expected 1, 'violation mask.rank')"; exit 1; }
[[ -f $prefix/share/doc/attn_doctor/README.md ]] || { echo "FAIL: README.md not installed under share/doc/attn_doctor"; exit 1; }
echo "PASS: $bin ($got) diagnoses $case_file"
