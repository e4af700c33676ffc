#!/usr/bin/env bash
# `attn-doctor --version` names the commit the binary was built from: in a git checkout, HEAD
# as of the last build (a commit or checkout re-runs the configure step that records it);
# outside one, "unknown" (tests/install/wheel_and_pip.sh builds from a copy without .git).
# Usage: version_commit.sh BINARY
set -uo pipefail
binary=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
got=$("$binary" --version | sed -n 's/^commit: //p')
top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null || true)
if [[ -n $top && $(cd "$top" && pwd -P) == $(cd "$root" && pwd -P) ]]; then
  want=$(git -C "$root" rev-parse HEAD)
else
  want=unknown
fi
[[ $got == "$want" ]] || { echo "FAIL: --version names commit '$got', expected '$want' (rebuild after a commit)"; exit 1; }
echo "PASS: commit $got"
