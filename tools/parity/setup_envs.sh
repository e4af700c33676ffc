#!/usr/bin/env bash
# Install what the parity harness runs on, outside the repository (default /work/venvs):
#   torch24/          a venv with torch 2.4.0 (+ numpy 1.26, einops)   -- the base interpreter
#   torch26/          a venv with torch 2.6.0 (transformers >= 5.? require torch >= 2.6;
#                     4.52.x cannot build a model on torch < 2.5)
#   fla-<release>/    flash-linear-attention and fla-core releases (--no-deps) for fla_layer.py
#   tf-<release>/     each transformers release with the dependency versions it requires,
#                     installed with `pip install --target` (torch itself comes from the venv)
#   buildhelpers/     packaging/psutil/ninja/wheel: `pip download` of flash-attn sdists prepares
#                     their metadata with setup.py, which imports them
# Idempotent: what exists is kept.
set -euo pipefail
VENVS=${PARITY_VENVS:-/work/venvs}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$VENVS"
if [ ! -x "$VENVS/torch24/bin/python" ]; then
  python3 -m venv "$VENVS/torch24"
  "$VENVS/torch24/bin/pip" install -q torch==2.4.0 numpy==1.26.4 einops
fi
if [ ! -x "$VENVS/torch26/bin/python" ]; then
  "$VENVS/torch24/bin/python" -m venv "$VENVS/torch26"
  "$VENVS/torch26/bin/pip" install -q torch==2.6.0 numpy==1.26.4 einops
fi
[ -d "$VENVS/buildhelpers/packaging" ] || \
  "$VENVS/torch24/bin/pip" install -q --target "$VENVS/buildhelpers" packaging psutil ninja wheel
echo "numpy==1.26.4" > "$VENVS/constraints.txt"
for release in $("$VENVS/torch24/bin/python" -c "import sys; sys.path.insert(0, '$HERE'); import parity, llama_mask, hybrid; print(' '.join(sorted(set(parity.RELEASES + llama_mask.RELEASES + hybrid.RELEASES))))"); do
  [ -d "$VENVS/tf-$release/transformers" ] && continue
  echo "installing transformers $release"
  "$VENVS/torch24/bin/pip" install -q --target "$VENVS/tf-$release" -c "$VENVS/constraints.txt" \
    "transformers==$release"
done
# FLA's GatedDeltaNet layer (fla_layer.py): each release without its dependencies (torch, triton
# and einops come from torch26; transformers from a tf-<release>)
for release in $("$VENVS/torch24/bin/python" -c "import sys; sys.path.insert(0, '$HERE'); import fla_layer; print(' '.join(fla_layer.RELEASES))"); do
  [ -d "$VENVS/fla-$release/fla" ] && continue
  echo "installing flash-linear-attention $release"
  "$VENVS/torch24/bin/pip" install -q --no-deps --target "$VENVS/fla-$release" "flash-linear-attention==$release" "fla-core==$release"
done
