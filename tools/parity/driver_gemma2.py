"""Gemma-2 `generate` with attn_implementation="flash_attention_2" on one transformers release.

A tiny randomly initialised Gemma-2 (seeded; sliding window shorter than the prompt) generates a
few tokens for a left-padded batch of two prompts. The stand-in flash_attn computes attention in
plain torch so generation proceeds; every `_flash_attention_forward` call of the model is
recorded with its inputs (mask, shapes, window, softcap) and what reached flash-attn, or the
exception the release raised (transformers#32309 on 4.44.0, fixed by PR #32522 in 4.44.1).
"""

import functools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tracing  # noqa: E402

PROMPT_LENGTHS = [8, 5]   # left padded to 8
SLIDING_WINDOW = 4
MAX_NEW_TOKENS = 3


def describe_mask(mask):
    if mask is None:
        return None
    out = {"shape": list(mask.shape), "dtype": str(mask.dtype).replace("torch.", "")}
    if mask.is_floating_point():
        # additive: record where the large negative value sits (1 = masked)
        out["style"] = "additive"
        out["masked"] = (mask < -1.0).to(torch.int64).tolist()
    else:
        out["values"] = mask.to(torch.int64).tolist()
    return out


def main():
    args, env = tracing.start_model_driver()
    from flash_attn import _recorder
    from transformers import Gemma2Config, Gemma2ForCausalLM
    import importlib
    try:
        importlib.import_module("transformers.modeling_flash_attention_utils")
        conversion_module = True
    except ModuleNotFoundError:  # <= 4.42: the conversion is a method of Gemma2FlashAttention2
        conversion_module = False
    mg = importlib.import_module("transformers.models.gemma2.modeling_gemma2")
    calls = []

    def describe(query_states, key_states, value_states, attention_mask, query_length, kw):
        return {
            "index": len(calls),
            "query_length": query_length,
            "q_shape": list(query_states.shape),
            "k_shape": list(key_states.shape),
            "attention_mask": describe_mask(attention_mask),
            "sliding_window": kw.get("sliding_window"),
            "softcap": kw.get("softcap"),
            "position_ids": kw["position_ids"].tolist() if kw.get("position_ids") is not None else None,
        }

    if conversion_module:
        # the model reaches the function through whichever module imported it by name
        tracing.record_flash_attention_forward(env, ("transformers.models.gemma2.modeling_gemma2",
                                                     "transformers.integrations.flash_attention"),
                                               describe, lambda: calls)
    else:
        tracing._wrap_unpad_data(mg, "_get_unpad_data")
        tracing._wrap_upad_input(mg.Gemma2FlashAttention2, "_upad_input", "Gemma2FlashAttention2", True)
        original = mg.Gemma2FlashAttention2._flash_attention_forward

        @functools.wraps(original)
        def recorded_method(self, query_states, key_states, value_states, attention_mask, query_length, *a, **kw):
            start = len(_recorder.CALLS)
            entry = describe(query_states, key_states, value_states, attention_mask, query_length, kw)
            calls.append(entry)
            error = None
            try:
                return original(self, query_states, key_states, value_states, attention_mask, query_length, *a, **kw)
            except Exception as exc:
                error = tracing.describe_exception(exc)
                raise
            finally:
                entry.update(tracing.summarise(_recorder.CALLS[start:], None, error))

        mg.Gemma2FlashAttention2._flash_attention_forward = recorded_method
        env["patches"].append("Gemma2FlashAttention2._flash_attention_forward: wrapped to record each call's "
                              "inputs and outcome (behaviour unchanged)")
    env["patches"].append("flash_attn stand-in computes attention in plain torch (COMPUTE=True) so generation proceeds")

    config = Gemma2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=64,
        sliding_window=SLIDING_WINDOW, query_pre_attn_scalar=16, attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0, pad_token_id=0, bos_token_id=2, eos_token_id=1,
        cache_implementation="hybrid",
    )
    torch.manual_seed(0)
    model = Gemma2ForCausalLM._from_config(config, attn_implementation="flash_attention_2",
                                           torch_dtype=torch.bfloat16)
    model.eval()
    width = max(PROMPT_LENGTHS)
    gen = torch.Generator().manual_seed(1)
    input_ids = torch.randint(3, 64, (len(PROMPT_LENGTHS), width), generator=gen)
    attention_mask = torch.zeros(len(PROMPT_LENGTHS), width, dtype=torch.int64)
    for row, n in enumerate(PROMPT_LENGTHS):
        attention_mask[row, width - n:] = 1
        input_ids[row, :width - n] = config.pad_token_id
    outcome = {"status": "ok"}
    try:
        with torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                 max_new_tokens=MAX_NEW_TOKENS, do_sample=False,
                                 cache_implementation="hybrid")
        outcome["generated_shape"] = list(out.shape)
    except Exception as exc:
        outcome = {"status": "error", "error": tracing.describe_exception(exc)}
    result = {
        "environment": env,
        "model": {
            "config": {k: getattr(config, k) for k in (
                "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "sliding_window", "attn_logit_softcapping",
                "final_logit_softcapping", "query_pre_attn_scalar", "cache_implementation")},
            "attn_implementation": model.config._attn_implementation,
            "dtype": "bf16",
            "init": "random, torch.manual_seed(0)",
        },
        "generate": {
            "prompt_lengths": PROMPT_LENGTHS, "padding_side": "left", "max_new_tokens": MAX_NEW_TOKENS,
            "do_sample": False, "cache_implementation": "hybrid",
            "attention_mask": attention_mask.tolist(),
        },
        "outcome": outcome,
        "calls": calls,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
