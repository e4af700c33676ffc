#!/usr/bin/env bash
# Regenerate every parity golden under tests/golden/ from the real releases (tools/parity/README.md).
# Needs PyTorch and PyPI: never run by CI, which only replays the committed goldens.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VENVS=${PARITY_VENVS:-/work/venvs}
bash "$HERE/setup_envs.sh"
PY="$VENVS/torch24/bin/python"
export PYTHONPATH="$VENVS/buildhelpers"
cd "$HERE"
"$PY" make_batches.py          # 001-053, 058, 060-062: the batch matrix
"$PY" parity.py gemma2         # gemma2-generate-<release>.json, batches 054-057
"$PY" parity.py qwen2vl        # qwen2vl-forward-<release>.json (batches 060-062 are model level)
"$PY" parity.py model          # model-llama-<release>.json, batches 070-077 (model-level masks)
"$PY" parity.py hybrid         # hybrid-qwen3next-<release>.json, batches 080-082
"$PY" parity.py fla-layer      # fla-gdn-<release>.json, batches 083-085
"$PY" parity.py hf             # transformers-<release>.json
"$PY" parity.py unpad          # flash_attn-<release>.json, fla-<release>.json
"$PY" summarise.py > "$HERE/../../tests/golden/SUMMARY.txt"
echo "goldens regenerated; review with: git diff --stat tests/golden"
