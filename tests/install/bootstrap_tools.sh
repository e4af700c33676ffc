#!/usr/bin/env bash
# scripts/bootstrap asks apt-get only for what is missing: a Debian package dpkg lists is
# present, and so is a tool that works without its package (cmake from pip at least
# CMakeLists.txt's minimum, ninja on PATH, jsonschema importable by python3), so a machine
# without a network that has them is not sent to apt-get. Libraries are asked of dpkg alone.
# dpkg-query, apt-get, sudo, cmake, ninja and python3 are stand-ins on a PATH of their own.
# Usage: bootstrap_tools.sh
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
for tool in bash sed sort grep id dirname; do ln -s "$(command -v "$tool")" "$work/bin/$tool"; done
cat >"$work/bin/dpkg-query" <<'EOS'
#!/bin/bash
# dpkg-query -W -f='${Status}' PACKAGE: installed when PACKAGE is in $DPKG_HAS
for p in $DPKG_HAS; do [[ $p == "${!#}" ]] && { printf 'install ok installed'; exit 0; }; done
echo "dpkg-query: no packages found matching ${!#}" >&2
exit 1
EOS
cat >"$work/bin/apt-get" <<'EOS'
#!/bin/bash
echo "apt-get $*" >>"$CALLS"
EOS
cat >"$work/bin/sudo" <<'EOS'
#!/bin/bash
exec "$@"
EOS
cat >"$work/bin/cmake" <<'EOS'
#!/bin/bash
echo "cmake $*" >>"$CALLS"
[[ $1 == --version ]] && printf 'cmake version %s\n\nCMake suite maintained and supported by Kitware (kitware.com/cmake).\n' "$CMAKE_VERSION"
EOS
cat >"$work/bin/python3" <<'EOS'
#!/bin/bash
[[ $1 == -c && $2 == "import jsonschema" && $JSONSCHEMA == yes ]]
EOS
printf '#!/bin/bash\n' >"$work/ninja"
chmod +x "$work/bin/"* "$work/ninja"
all="cmake ninja-build g++ make libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev catch2 python3 python3-dev python3-venv python3-jsonschema"
export CALLS=$work/calls
fail=0
# run NAME DPKG_HAS CMAKE_VERSION JSONSCHEMA NINJA(yes|no) EXPECTED_CALLS EXPECTED_STDERR
run() {
  : >"$CALLS"
  rm -f "$work/bin/ninja"
  [[ $5 == yes ]] && ln -s "$work/ninja" "$work/bin/ninja"
  local err rc
  err=$(env -i PATH="$work/bin" CALLS="$CALLS" DPKG_HAS="$2" CMAKE_VERSION="$3" JSONSCHEMA="$4" \
        "$work/bin/bash" "$root/scripts/bootstrap" 2>&1)
  rc=$?
  [[ $rc == 0 && $(cat "$CALLS") == "$6" && $err == "$7" ]] ||
    { echo "FAIL: $1: exit $rc; calls:"; cat "$CALLS"; echo "stderr: $err"; fail=1; }
}
without() { local out=" $all "; for p; do out=${out/ $p / }; done; echo $out; }
install="apt-get install -y -qq --no-install-recommends"
run "a Debian machine with every package" "$all" 3.25.1 no no "" ""
run "pip's cmake and ninja, jsonschema in python3, none from Debian" \
    "$(without cmake ninja-build python3-jsonschema)" 3.31.6 yes yes "cmake --version" ""
run "cmake exactly CMakeLists.txt's minimum" "$(without cmake)" 3.24.0 no no "cmake --version" ""
run "a cmake older than CMakeLists.txt's minimum" "$(without cmake)" 3.22.1 no no \
    "cmake --version
apt-get update -qq
$install cmake" "bootstrap: installing cmake"
run "no ninja on PATH, jsonschema not importable" "$(without ninja-build python3-jsonschema)" 3.31.6 no no \
    "apt-get update -qq
$install ninja-build python3-jsonschema" "bootstrap: installing ninja-build python3-jsonschema"
run "a header library is asked of dpkg alone" "$(without libcli11-dev)" 3.31.6 yes yes \
    "apt-get update -qq
$install libcli11-dev" "bootstrap: installing libcli11-dev"
((fail == 0)) && echo "PASS: scripts/bootstrap takes working tools as present and installs only what is missing"
exit $fail
