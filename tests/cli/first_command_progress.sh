#!/usr/bin/env bash
# The README's first command (scripts/attn-doctor) prints progress while it builds (what it
# builds, then every 10 %) and keeps the build's log in the build folder; with nothing to build
# it prints nothing of its own. It asks scripts/build for the binary alone, with the CUDA
# backend only where a GPU driver is (ATTN_DOCTOR_CUDA=GPU) in a folder not yet configured, and
# keeps a configured folder's setting (./scripts/test's AUTO) unless ATTN_DOCTOR_CUDA is given.
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
echo "target=$ATTN_DOCTOR_TARGET cuda=$ATTN_DOCTOR_CUDA" >"$BUILD_DIR/asked"
echo "-- attn-doctor: CUDA backend OFF (CPU backend only: no NVIDIA driver on this machine; ATTN_DOCTOR_CUDA=ON builds it)" >&2
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
            "attn-doctor: building the binary; CUDA backend OFF (CPU backend only: no NVIDIA driver" \
            "attn-doctor: building 40 steps" "attn-doctor: building [4/40] 10%" "attn-doctor: building [40/40] 100%"; do
  grep -qF -- "$want" <<<"$err" || { echo "FAIL: progress lacks: $want"; fail=1; }
done
[[ $(grep -c "building \[" <<<"$err") == 11 ]] || { echo "FAIL: expected 11 progress lines (every 10 %):"; echo "$err"; fail=1; }
grep -qF "[17/40] Building CXX object lib/x17.cpp.o" "$work/build/attn-doctor-build.log" ||
  { echo "FAIL: the build's output is not in build/attn-doctor-build.log"; fail=1; }
[[ $(cat "$work/build/asked") == "target=attn-doctor cuda=GPU" ]] ||
  { echo "FAIL: an unconfigured folder: scripts/build was asked for '$(cat "$work/build/asked")'"; fail=1; }
# a folder ./scripts/test configured (AUTO) keeps that; ATTN_DOCTOR_CUDA given wins
echo "ATTN_DOCTOR_CUDA:STRING=AUTO" >"$work/build/CMakeCache.txt"
BUILD_DIR=$work/build ATTN_DOCTOR_BUILD_COMMAND=$work/fake-build "$root/scripts/attn-doctor" --version >/dev/null 2>&1
[[ $(cat "$work/build/asked") == "target=attn-doctor cuda=AUTO" ]] ||
  { echo "FAIL: a folder configured AUTO: scripts/build was asked for '$(cat "$work/build/asked")'"; fail=1; }
BUILD_DIR=$work/build ATTN_DOCTOR_CUDA=ON ATTN_DOCTOR_BUILD_COMMAND=$work/fake-build "$root/scripts/attn-doctor" --version >/dev/null 2>&1
[[ $(cat "$work/build/asked") == "target=attn-doctor cuda=ON" ]] ||
  { echo "FAIL: ATTN_DOCTOR_CUDA=ON: scripts/build was asked for '$(cat "$work/build/asked")'"; fail=1; }
rm -f "$work/build/CMakeCache.txt"
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
# scripts/build (both commands build through it, into the same build/): a folder configured
# with another ATTN_DOCTOR_CUDA is configured again with the one asked for (./scripts/test's
# AUTO after command 1's GPU gets the CUDA backend where nvcc is), and not otherwise. cmake is
# a stand-in that records its arguments; dpkg-query one that lists every package, so that
# scripts/bootstrap (tested by tests/install/bootstrap_tools.sh) has nothing to install
# whatever this machine lacks or whether it reaches a network.
mkdir -p "$work/bin" "$work/b2"
cat >"$work/bin/cmake" <<'EOS'
#!/usr/bin/env bash
echo "cmake $*" >>"$CMAKE_CALLS"
EOS
cat >"$work/bin/dpkg-query" <<'EOS'
#!/usr/bin/env bash
printf 'install ok installed'
EOS
chmod +x "$work/bin/cmake" "$work/bin/dpkg-query"
touch "$work/b2/build.ninja"
echo "ATTN_DOCTOR_CUDA:STRING=GPU" >"$work/b2/CMakeCache.txt"
export CMAKE_CALLS=$work/calls
: >"$CMAKE_CALLS"
PATH=$work/bin:$PATH BUILD_DIR=$work/b2 ATTN_DOCTOR_CUDA=AUTO JOBS=2 "$root/scripts/build" 2>"$work/err" || true
grep -q -- "-B $work/b2 -DATTN_DOCTOR_CUDA=AUTO" "$CMAKE_CALLS" && grep -q -- "--build $work/b2 -j 2$" "$CMAKE_CALLS" ||
  { echo "FAIL: a folder configured GPU, asked AUTO: cmake calls:"; cat "$CMAKE_CALLS"; cat "$work/err"; fail=1; }
echo "ATTN_DOCTOR_CUDA:STRING=AUTO" >"$work/b2/CMakeCache.txt"
: >"$CMAKE_CALLS"
PATH=$work/bin:$PATH BUILD_DIR=$work/b2 ATTN_DOCTOR_CUDA=AUTO ATTN_DOCTOR_TARGET=attn-doctor JOBS=2 "$root/scripts/build" 2>/dev/null || true
[[ $(cat "$CMAKE_CALLS") == "cmake --build $work/b2 -j 2 --target attn-doctor" ]] ||
  { echo "FAIL: a folder configured as asked is built, not configured again: cmake calls:"; cat "$CMAKE_CALLS"; fail=1; }
((fail == 0)) && echo "PASS"
exit $fail
