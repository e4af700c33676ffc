#!/usr/bin/env bash
# Configuring without a C++ dependency fails with a message that names the Debian packages to
# install and scripts/bootstrap (find_package's own message names CMake config files). The
# dependencies are hidden from CMake with CMAKE_DISABLE_FIND_PACKAGE_<name>.
# Usage: missing_deps.sh WORK_DIR
set -uo pipefail
work=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
out=$(cmake -S "$root" -B "$work" -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON \
        -DATTN_DOCTOR_CUDA=OFF -DATTN_DOCTOR_PYTHON=OFF -DBUILD_TESTING=OFF 2>&1)
rc=$?
fail=0
flat=$(tr '\n' ' ' <<<"$out" | tr -s ' ')  # CMake wraps a message's lines
[[ $rc != 0 ]] || { echo "FAIL: configure succeeded without nlohmann_json and CLI11"; fail=1; }
for want in "attn-doctor needs nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev" \
            "missing here: nlohmann-json3-dev libcli11-dev." \
            "Run scripts/bootstrap" "sudo apt-get install nlohmann-json3-dev libcli11-dev"; do
  grep -qF -- "$want" <<<"$flat" || { echo "FAIL: the message lacks: $want"; fail=1; }
done
((fail)) && echo "$out" | tail -n 20
rm -rf "$work"
((fail == 0)) && echo "PASS: a missing dependency is named with its package and scripts/bootstrap"
exit $fail
