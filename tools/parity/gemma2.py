"""Gemma-2 generate goldens and the batch files derived from them (parity.py gemma2).

Writes tests/golden/gemma2-generate-<release>.json for every release that has Gemma-2 (4.42+)
and, from the recorded calls, the batches:
  054-gemma2-4.44.0-fa-call.json        the exact call that crashed 4.44.0 (function level)
  055-gemma2-4.44.1-sliding-prefill-call.json  what 4.44.1 passed instead (function level)
  056-gemma2-generate-prefill.json      the model-level description (architecture gemma2, the
                                        model's 2-D mask, hybrid cache): its replay must match
                                        each release's first sliding-layer prefill call
  057-gemma2-generate-decode.json       the same for the first decode step
"""

import json

import driver_gemma2 as g2

RELEASES = [
    "4.42.4", "4.43.4", "4.44.0", "4.44.1", "4.44.2", "4.45.2", "4.46.3", "4.47.1", "4.48.3", "4.49.0",
    "4.50.3", "4.52.4", "4.53.0", "4.53.1", "4.53.3", "4.54.0", "4.54.1", "4.55.0", "4.55.4", "4.56.2", "4.57.6",
    "5.0.0", "5.4.0", "5.5.0", "5.14.1", "5.16.0", "5.20.0", "5.23.0",
    # model code without a golden before (releases.py: docs/spec/releases.md)
    "5.3.0", "5.24.0", "4.48.1",
]
# the prefill call of the first (sliding-window) layer, and the first decode call of that layer
PREFILL_CALL, DECODE_CALL = 0, 2


def model_block():
    return {"num_heads": 2, "num_kv_heads": 1, "head_dim": 16, "dtype": "bf16",
            "sliding_window": g2.SLIDING_WINDOW, "softcap": 50.0}


def write_batches(goldens, batches_dir):
    width = max(g2.PROMPT_LENGTHS)
    max_cache = width + g2.MAX_NEW_TOKENS
    crash = goldens["4.44.0"]["calls"][PREFILL_CALL]
    fixed = goldens["4.44.1"]["calls"][PREFILL_CALL]
    docs = {}
    docs["054-gemma2-4.44.0-fa-call.json"] = {
        "format": "attn-doctor/batch@1", "name": "gemma2-4.44.0-fa-call",
        "description": "The exact _flash_attention_forward call of Gemma-2's first (sliding-window) layer in "
                       "4.44.0 generate: a 4-D additive mask (B,1,S,max_cache_len) built by "
                       "prepare_inputs_for_generation, keys cut to attention_mask.shape[1] == 1 by the layer. "
                       "Recorded by tools/parity (gemma2-generate-4.44.0.json, call 0).",
        "references": ["huggingface/transformers#32309", "Dao-AILab/flash-attention#1156"],
        "environment": {"flash_attn": "2.6.3"},
        "model": {"num_heads": 2, "num_kv_heads": 1, "head_dim": 16, "dtype": "bf16", "softcap": 50.0},
        "batch": {"attention_mask": {"shape": crash["attention_mask"]["shape"],
                                     "from": {"lengths": g2.PROMPT_LENGTHS, "width": width, "padding_side": "left"},
                                     "style": "additive", "causal": True},
                  "query_length": crash["query_length"], "kv_length": crash["k_shape"][1]},
    }
    docs["055-gemma2-4.44.1-sliding-prefill-call.json"] = {
        "format": "attn-doctor/batch@1", "name": "gemma2-4.44.1-sliding-prefill-call",
        "description": "What Gemma-2's first (sliding-window) layer passed in 4.44.1 prefill: the 2-D mask cut "
                       "to its last W columns, W keys, S queries (gemma2-generate-4.44.1.json, call 0).",
        "references": ["huggingface/transformers#32522"],
        "environment": {"flash_attn": "2.6.3"},
        "model": {"num_heads": 2, "num_kv_heads": 1, "head_dim": 16, "dtype": "bf16",
                  "sliding_window": g2.SLIDING_WINDOW, "softcap": 50.0},
        "batch": {"attention_mask": {"values": fixed["attention_mask"]["values"]},
                  "query_length": fixed["query_length"], "kv_length": fixed["k_shape"][1]},
    }
    model = dict(model_block(), architecture="gemma2")
    docs["056-gemma2-generate-prefill.json"] = {
        "format": "attn-doctor/batch@1", "name": "gemma2-generate-prefill",
        "description": "Model level: Gemma-2 generate prefill with flash_attention_2, left-padded prompts longer "
                       "than the sliding window, hybrid cache. Replayed as the first sliding-window layer's call "
                       "(model.architecture selects the release's Gemma-2 quirks); the truth per release is "
                       "call 0 of tests/golden/gemma2-generate-<release>.json.",
        "references": ["huggingface/transformers#32309", "Dao-AILab/flash-attention#1156",
                       "huggingface/transformers#32522"],
        "environment": {"flash_attn": "2.6.3", "torch": "2.4.0"},
        "model": model,
        "batch": {"attention_mask": {"lengths": g2.PROMPT_LENGTHS, "width": width, "padding_side": "left"},
                  "query_length": width, "kv_length": width,
                  "cache": {"kind": "hybrid", "max_cache_len": max_cache, "past_length": 0}},
    }
    docs["057-gemma2-generate-decode.json"] = {
        "format": "attn-doctor/batch@1", "name": "gemma2-generate-decode",
        "description": "Model level: the first decode step of the same generate (one new token per row, mask "
                       "of width S + 1). Truth per release: call 2 of gemma2-generate-<release>.json.",
        "references": ["huggingface/transformers#32309"],
        "environment": {"flash_attn": "2.6.3", "torch": "2.4.0"},
        "model": model,
        "batch": {"attention_mask": {"lengths": [n + 1 for n in g2.PROMPT_LENGTHS], "width": width + 1,
                                     "padding_side": "left"},
                  "query_length": 1, "kv_length": width + 1,
                  "cache": {"kind": "hybrid", "max_cache_len": max_cache, "past_length": width}},
    }
    for name, doc in docs.items():
        (batches_dir / name).write_text(json.dumps(doc, indent=1) + "\n")


def run(run_python, standin, python_for, site_for, golden_dir, batches_dir, dumps, cache, only=None):
    """Records the releases of RELEASES (those in `only`, when given); the derived batches read the
    4.44.0 and 4.44.1 goldens, recorded now or before."""
    goldens = {}
    for release in RELEASES:
        if only is not None and release not in only:
            path = golden_dir / f"gemma2-generate-{release}.json"
            if path.exists():
                goldens[release] = json.loads(path.read_text())
            continue
        out = cache / f"gemma2-{release}.json"
        python = python_for(release, "gemma2")
        run_python("driver_gemma2.py", ["--out", str(out)], [standin("2.6.3"), site_for(release)],
                   python=python)
        data = json.loads(out.read_text())
        env = data.pop("environment")
        golden = {
            "format": "attn-doctor/golden-generate@1",
            "library": "transformers",
            "release": release,
            "torch": env["torch"], "torch_device": "cpu", "python": env["python"],
            "loaded": "whole",
            "entry_point": "transformers.Gemma2ForCausalLM.generate",
            "stubs": [],
            "patches": env["patches"],
            "flash_attn_standin": env["flash_attn_standin"],
            "prefill_call": PREFILL_CALL, "decode_call": DECODE_CALL,
            "model_batches": {"prefill": "056-gemma2-generate-prefill.json",
                              "decode": "057-gemma2-generate-decode.json"},
        }
        golden.update(data)
        goldens[release] = golden
        (golden_dir / f"gemma2-generate-{release}.json").write_text(dumps(golden) + "\n")
        print(f"wrote gemma2-generate-{release}.json: {golden['outcome']['status']}, {len(golden['calls'])} calls")
    write_batches(goldens, batches_dir)
