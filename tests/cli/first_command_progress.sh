#!/usr/bin/env bash
# The README's first command (scripts/attn-doctor) prints progress while it builds and keeps
# the build's log in the build folder; with nothing to build it prints nothing of its own.
# The build is a stand-in printing what cmake and ninja print (a real first build takes
# minutes), then the real binary of this build runs.
# Usage: first_command_progress.sh BUILD_DIR (holding the attn-doctor binary)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/build"
cp "$build/attn-doctor" "$work/build/"
cat >"$work/fake-build" <<'EOS'
#!/usr/bin/env bash
echo "-- The CXX compiler identification is GNU 12.2.0" >&2
echo "[0/2] Re-checking globbed directories..." >&2
for i in $(seq 1 40); do echo "[$i/40] Building CXX object lib/x$i.cpp.o" >&2; done
EOS
cat >"$work/no-work" <<'EOS'
#!/usr/bin/env bash
echo "[0/2] Re-checking globbed directories..." >&2
echo "ninja: no work to do." >&2
EOS
chmod +x "$work/fake-build" "$work/no-work"
fail=0
err=$(BUILD_DIR=$work/build ATTN_DOCTOR_BUILD_COMMAND=$work/fake-build "$root/scripts/attn-doctor" --version 2>&1 >/dev/null)
for want in "attn-doctor: configuring the build (log: $work/build/attn-doctor-build.log)" \
            "attn-doctor: building 40 steps" "attn-doctor: building [4/40] 10%" "attn-doctor: building [40/40] 100%"; do
  grep -qF -- "$want" <<<"$err" || { echo "FAIL: progress lacks: $want"; fail=1; }
done
[[ $(grep -c "building \[" <<<"$err") == 11 ]] || { echo "FAIL: expected 11 progress lines (every 10 %):"; echo "$err"; fail=1; }
grep -qF "[17/40] Building CXX object lib/x17.cpp.o" "$work/build/attn-doctor-build.log" ||
  { echo "FAIL: the build's output is not in build/attn-doctor-build.log"; fail=1; }
out=$(BUILD_DIR=$work/build ATTN_DOCTOR_BUILD_COMMAND=$work/no-work "$root/scripts/attn-doctor" --version 2>"$work/err")
[[ $out == "attn-doctor "* && ! -s $work/err ]] || { echo "FAIL: with nothing to build: stdout '$out', stderr '$(cat "$work/err")'"; fail=1; }
cat >"$work/broken" <<'EOS'
#!/usr/bin/env bash
echo "lib/x.cpp:1:1: error: expected declaration" >&2
exit 1
EOS
chmod +x "$work/broken"
err=$(BUILD_DIR=$work/build ATTN_DOCTOR_BUILD_COMMAND=$work/broken "$root/scripts/attn-doctor" --version 2>&1)
rc=$?
[[ $rc == 3 ]] && grep -qF "error: expected declaration" <<<"$err" ||
  { echo "FAIL: a failed build: exit $rc (expected 3), the log's end shown: $err"; fail=1; }
((fail == 0)) && echo "PASS"
exit $fail
