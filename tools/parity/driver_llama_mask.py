"""A tiny Llama with attn_implementation="flash_attention_2" on one transformers release: what the
model's mask preparation hands to `_flash_attention_forward` for a mask given to the model's
forward (segment ids, padding, all ones), and what the conversion makes of it.

Each scenario (llama_mask.SCENARIOS) is one forward pass of input_ids (B, S) with the scenario's
attention mask (and position ids where it gives them); every `_flash_attention_forward` call is
recorded (the mask and position ids that reached it, and what reached the stand-in flash-attn).
A tiny randomly initialised model (2 layers, hidden 64, 4 heads, 2 KV heads, bf16); the stand-in
flash_attn computes attention.
"""

import argparse
import functools
import importlib
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_mask  # noqa: E402
import tracing  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    env = tracing.patch_availability()
    from flash_attn import _recorder
    _recorder.COMPUTE = True
    from transformers import LlamaConfig, LlamaForCausalLM

    fau = importlib.import_module("transformers.modeling_flash_attention_utils")
    tracing.wrap_module_helpers(fau)
    calls = []
    original = fau._flash_attention_forward

    @functools.wraps(original)
    def recorded(query_states, key_states, value_states, attention_mask, query_length, *a, **kw):
        start = len(_recorder.CALLS)
        pos = kw.get("position_ids")
        entry = {"q_shape": list(query_states.shape), "k_shape": list(key_states.shape),
                 "attention_mask": None if attention_mask is None else
                 {"shape": list(attention_mask.shape), "dtype": str(attention_mask.dtype).replace("torch.", ""),
                  "values": attention_mask.to(torch.int64).tolist()},
                 "position_ids": None if pos is None else {"shape": list(pos.shape), "values": pos.tolist()}}
        calls[-1]["calls"].append(entry)
        error = None
        try:
            return original(query_states, key_states, value_states, attention_mask, query_length, *a, **kw)
        except Exception as exc:
            error = tracing.describe_exception(exc)
            raise
        finally:
            entry.update(tracing.summarise(_recorder.CALLS[start:], None, error))

    tracing.wrap_entry_point(original, recorded, env, ("transformers.models.llama.modeling_llama",
                                                       "transformers.integrations.flash_attention"))

    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0)
    torch.manual_seed(0)
    model = LlamaForCausalLM._from_config(config, attn_implementation="flash_attention_2", torch_dtype=torch.bfloat16)
    model.eval()
    g = torch.Generator().manual_seed(1)
    results = []
    for name, spec in llama_mask.SCENARIOS.items():
        mask = torch.tensor(spec["attention_mask"])
        inputs = {"input_ids": torch.randint(3, 59, tuple(mask.shape), generator=g), "attention_mask": mask}
        if "position_ids" in spec:
            inputs["position_ids"] = torch.tensor(spec["position_ids"])
        results.append({"scenario": name, "inputs": {k: {"shape": list(v.shape), "values": v.tolist()}
                                                     for k, v in inputs.items() if k != "input_ids"},
                        "calls": []})
        calls.append(results[-1])
        try:
            with torch.no_grad():
                model(**inputs, use_cache=False)
            results[-1]["outcome"] = {"status": "ok"}
        except Exception as exc:
            results[-1]["outcome"] = {"status": "error", "error": tracing.describe_exception(exc)}
    Path(args.out).write_text(json.dumps({"environment": env, "scenarios": results}, indent=1))


if __name__ == "__main__":
    main()
