#!/usr/bin/env bash
# The README's install, from a fresh copy of the repository (what a clone holds: tracked files
# and untracked ones git does not ignore):
#   python3 -m venv v && v/bin/pip install . && v/bin/attn-doctor check CASE
#   v/bin/python -m attn_doctor check CASE
# then attn_doctor.check() and the Python tests against the installed package. The wheel is
# built without the CUDA backend (time), with ccache when present.
# Skipped (exit 77, reason on stdout) when no package registry is reachable: pip needs
# scikit-build-core and nanobind from one.
# Usage: pip_install.sh PYTHON WORK_DIR
set -euo pipefail
python=$1 work=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$work"
rm -rf "$work/v" "$work/probe" "$work/tests" "$work/src.new"
if ! timeout 120 "$python" -m pip download --no-deps -q -d "$work/probe" scikit-build-core >"$work/probe.log" 2>&1; then
  echo "SKIPPED: no package registry reachable: pip download scikit-build-core failed: $(tail -n 1 "$work/probe.log")"
  exit 77
fi
# The copy keeps its place between runs (same paths: ccache hits, pip's build folder reused).
mkdir -p "$work/src.new"
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$work/src.new"
if [[ -d $work/src/build-python ]]; then mv "$work/src/build-python" "$work/src.new/"; fi
rm -rf "$work/src" && mv "$work/src.new" "$work/src"

"$python" -m venv "$work/v"
if command -v ccache >/dev/null; then export CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)}
start=$SECONDS
"$work/v/bin/pip" install -q --disable-pip-version-check -C cmake.define.ATTN_DOCTOR_CUDA=OFF "$work/src" \
  > "$work/pip.log" 2>&1 || { cat "$work/pip.log"; echo "FAIL: pip install . failed"; exit 1; }
echo "pip install . took $((SECONDS - start)) s"

case_file=$root/repro_cases/gemma2-4.44.0-sliding-window-generate.json
fail=0
expect() {  # expect WHAT EXIT-CODE TEXT -- command...
  local what=$1 code=$2 text=$3; shift 4
  local out rc
  set +e; out=$(cd "$work" && "$@" 2>&1); rc=$?; set -e
  if [[ $rc != "$code" ]] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL: $what: exit $rc (expected $code), output lacks '$text':"; head -c 3000 <<<"$out"; fail=1
  else
    echo "PASS: $what"
  fi
}
expect "v/bin/attn-doctor check" 1 "first violation: mask.rank" -- "$work/v/bin/attn-doctor" check "$case_file" --backend none
expect "v/bin/python -m attn_doctor check" 1 "first violation: mask.rank" -- "$work/v/bin/python" -m attn_doctor check "$case_file" --backend none
expect "python -m attn_doctor --version" 0 "attn-doctor $("$work/v/bin/python" -c 'import attn_doctor; print(attn_doctor.__version__)')" -- "$work/v/bin/python" -m attn_doctor --version
expect "attn_doctor.check()" 0 "mask.rank" -- "$work/v/bin/python" -c \
  "import attn_doctor, sys; r = attn_doctor.check(sys.argv[1], backend='none'); print(r['first_violation']['id'])" "$case_file"
expect "the package is the installed one, with its extension" 0 "site-packages" -- "$work/v/bin/python" -c \
  "import attn_doctor._native, attn_doctor; print(attn_doctor.__file__)"
# The Python tests against the installed package (a copy outside the source tree, so that
# `attn_doctor` resolves to site-packages).
mkdir -p "$work/tests" && cp -r "$root/python/tests" "$work/tests/tests"
expect "python tests on the installed package" 0 "OK" -- env ATTN_DOCTOR_SOURCE_DIR="$root" \
  "$work/v/bin/python" -m unittest discover -s "$work/tests/tests" -t "$work/tests"
exit $fail
