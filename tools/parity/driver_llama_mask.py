"""A tiny Llama with attn_implementation="flash_attention_2" on one transformers release: what the
model's mask preparation hands to `_flash_attention_forward` for a mask given to the model's
forward (segment ids, padding, all ones), and what the conversion makes of it.

Each scenario (llama_mask.SCENARIOS) is one forward pass of input_ids (B, S) with the scenario's
attention mask (and position ids where it gives them); every `_flash_attention_forward` call is
recorded (the mask and position ids that reached it, and what reached the stand-in flash-attn).
A tiny randomly initialised model (2 layers, hidden 64, 4 heads, 2 KV heads, bf16); the stand-in
flash_attn computes attention.
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_mask  # noqa: E402
import tracing  # noqa: E402


def describe(query_states, key_states, value_states, attention_mask, query_length, kw):
    pos = kw.get("position_ids")
    return {"q_shape": list(query_states.shape), "k_shape": list(key_states.shape),
            "attention_mask": None if attention_mask is None else
            {"shape": list(attention_mask.shape), "dtype": str(attention_mask.dtype).replace("torch.", ""),
             "values": attention_mask.to(torch.int64).tolist()},
            "position_ids": None if pos is None else {"shape": list(pos.shape), "values": pos.tolist()}}


def static_cache(config, batch_size, length):
    from transformers import StaticCache
    try:  # >= 4.56
        return StaticCache(config=config, max_cache_len=length)
    except TypeError:
        return StaticCache(config=config, max_batch_size=batch_size, max_cache_len=length, device="cpu",
                           dtype=torch.bfloat16)


def main():
    args, env = tracing.start_model_driver()
    from transformers import LlamaConfig, LlamaForCausalLM

    calls = []
    tracing.record_flash_attention_forward(env, ("transformers.models.llama.modeling_llama",
                                                 "transformers.integrations.flash_attention"),
                                           describe, lambda: calls[-1]["calls"])

    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0)
    torch.manual_seed(0)
    model = LlamaForCausalLM._from_config(config, attn_implementation="flash_attention_2", torch_dtype=torch.bfloat16)
    model.eval()
    g = torch.Generator().manual_seed(1)
    results = []
    release = tuple(int(x) for x in env["transformers"].split(".")[:2])
    for name, spec in llama_mask.SCENARIOS.items():
        if "since" in spec and release < tuple(int(x) for x in spec["since"].split(".")[:2]):
            continue
        mask = torch.tensor(spec["attention_mask"])
        inputs = {"input_ids": torch.randint(3, 59, tuple(mask.shape), generator=g), "attention_mask": mask}
        if "position_ids" in spec:
            inputs["position_ids"] = torch.tensor(spec["position_ids"])
        results.append({"scenario": name, "inputs": {k: {"shape": list(v.shape), "values": v.tolist()}
                                                     for k, v in inputs.items() if k != "input_ids"},
                        "calls": []})
        cache = {"use_cache": False}
        if "static_cache" in spec:
            cache = {"use_cache": True, "past_key_values": static_cache(config, mask.shape[0], spec["static_cache"])}
            results[-1]["inputs"]["static_cache"] = {"max_cache_len": spec["static_cache"]}
        calls.append(results[-1])
        try:
            with torch.no_grad():
                model(**inputs, **cache)
            results[-1]["outcome"] = {"status": "ok"}
        except Exception as exc:
            results[-1]["outcome"] = {"status": "error", "error": tracing.describe_exception(exc)}
    Path(args.out).write_text(json.dumps({"environment": env, "scenarios": results}, indent=1))


if __name__ == "__main__":
    main()
