"""Run one transformers release's flash-attention conversion on batch files.

Invoked by parity.py in a fresh interpreter whose sys.path holds the release (installed under
/work/venvs/tf-<release>) and the stand-in flash_attn with a generated dist-info naming the
flash-attn version to impersonate. Writes one JSON object: the environment and, per batch, what
the release handed to flash-attn (or the exception it raised).

transformers >= 4.42: calls `transformers.modeling_flash_attention_utils._flash_attention_forward`.
transformers <= 4.41: calls `LlamaFlashAttention2._flash_attention_forward` of that release (the
per-model copy of the conversion).
"""

import argparse
import importlib.metadata
import inspect
import json
import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import batchfile  # noqa: E402
import tracing  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("batches", nargs="+")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)  # out-of-range gathers report the first offending index
    env = tracing.patch_availability()
    from flash_attn import _recorder

    target = tracing.load_target()
    env.update(target.describe())
    cases = []
    for path in args.batches:
        doc = json.loads(Path(path).read_text())
        arch = doc["model"].get("architecture")
        if (arch == "gemma2" and "cache" in doc.get("batch", {})) or arch == "qwen2_vl":
            # a model-level description: its truth is a model-level golden (gemma2.py, qwen2vl.py)
            cases.append({"batch": Path(path).name, "skipped": f"model-level batch (architecture {arch}): see "
                          "gemma2-generate-<release>.json / qwen2vl-forward-<release>.json"})
            continue
        if doc.get("batch", {}).get("attention_mask", {}).get("level") == "model":
            # the mask given to the model: its truth is model-llama-<release>.json (llama_mask.py)
            cases.append({"batch": Path(path).name, "skipped": "model-level mask: see model-llama-<release>.json"})
            continue
        case = batchfile.load(path)
        _recorder.CALLS.clear()
        tracing.reset()
        entry = {"batch": Path(path).name, "flash_attn": importlib.metadata.version("flash_attn")}
        try:
            ignored = target.call(case)
            error = None
        except Exception as exc:  # the release's own failure is the data we want
            ignored = target.last_ignored
            error = tracing.describe_exception(exc)
        entry.update(tracing.summarise(_recorder.CALLS, case, error))
        if ignored:
            entry["ignored_arguments"] = ignored
        cases.append(entry)
    Path(args.out).write_text(json.dumps({"environment": env, "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
