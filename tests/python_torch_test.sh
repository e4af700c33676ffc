#!/usr/bin/env bash
# ctest "python: checked ops on torch (CPU)": python/tests/test_ops.py (and test_train_step_bench.py, test_attn_layer_profile.py, test_bwd_preprocess_bench.py) with a Python that has
# torch and transformers: $ATTN_DOCTOR_TORCH_PYTHON, else the venv scripts/torch-env makes
# (.venv-torch). Without one the test prints SKIPPED and why (ctest reports it skipped).
# Usage: tests/python_torch_test.sh NATIVE_DIR
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=${ATTN_DOCTOR_TORCH_PYTHON:-}
if [[ -z $py && -x $root/.venv-torch/bin/python ]]; then
  py=$root/.venv-torch/bin/python
fi
if [[ -z $py ]]; then
  echo "SKIPPED: no Python with torch and transformers (run scripts/torch-env, or set ATTN_DOCTOR_TORCH_PYTHON)"
  exit 0
fi
if ! "$py" -c 'import torch, transformers' 2>/dev/null; then
  echo "SKIPPED: $py cannot import torch and transformers"
  exit 0
fi
out=$(cd "$root" && ATTN_DOCTOR_NATIVE_DIR=$1 PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH} \
      "$py" -m unittest -v tests.test_ops tests.test_train_step_bench tests.test_attn_layer_profile tests.test_bwd_preprocess_bench \
      tests.test_catch_table 2>&1)
rc=$?
echo "$out"
if [[ $rc -eq 0 ]] && grep -q "skipped '" <<<"$out" && ! grep -q " ok$" <<<"$out"; then
  echo "SKIPPED: every test skipped (the reason is printed above)"
fi
exit $rc
