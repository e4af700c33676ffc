"""Qwen2-VL with attn_implementation="flash_attention_2" on one transformers release: which
position ids reach `_flash_attention_forward` (3-D mRoPE ids or the text axis) in three text-only
forward passes, and what the conversion makes of them.

  padded      input_ids (2, 6) left padded, attention mask, no position ids (the model builds
              its (3, B, S) rope index)
  packed_2d   input_ids (1, 7), position ids (1, 7) of two packed sequences, no mask
  packed_3d   input_ids (1, 7), position ids (3, 1, 7) of two packed sequences, no mask
  packed_4d   input_ids (1, 7), position ids (4, 1, 7): the text axis first, then the 3 mRoPE axes

A tiny randomly initialised model (1 layer); the stand-in flash_attn computes attention.
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tracing  # noqa: E402


def describe(query_states, key_states, value_states, attention_mask, query_length, kw):
    pos = kw.get("position_ids")
    return {"q_shape": list(query_states.shape), "k_shape": list(key_states.shape),
            "attention_mask": None if attention_mask is None else
            {"shape": list(attention_mask.shape), "values": attention_mask.to(torch.int64).tolist()},
            "position_ids": None if pos is None else {"shape": list(pos.shape), "values": pos.tolist()}}


def main():
    args, env = tracing.start_model_driver()
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    calls = []
    tracing.record_flash_attention_forward(env, ("transformers.models.qwen2_vl.modeling_qwen2_vl",
                                                 "transformers.integrations.flash_attention"),
                                           describe, lambda: calls[-1]["calls"])

    config = Qwen2VLConfig(
        vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
        vision_config={"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2,
                       "in_channels": 3, "patch_size": 2, "spatial_merge_size": 1, "temporal_patch_size": 1},
        image_token_id=60, video_token_id=61, vision_start_token_id=62, vision_end_token_id=63, pad_token_id=0,
    )
    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration._from_config(config, attn_implementation="flash_attention_2",
                                                         torch_dtype=torch.bfloat16)
    model.eval()
    g = torch.Generator().manual_seed(1)
    packed = [0, 1, 2, 0, 1, 2, 3]
    scenarios = {
        "padded": {"input_ids": torch.randint(3, 59, (2, 6), generator=g),
                   "attention_mask": torch.tensor([[1] * 6, [0, 0, 1, 1, 1, 1]])},
        "packed_2d": {"input_ids": torch.randint(3, 59, (1, 7), generator=g),
                      "position_ids": torch.tensor([packed])},
        "packed_3d": {"input_ids": torch.randint(3, 59, (1, 7), generator=g),
                      "position_ids": torch.tensor([[packed]] * 3)},
        # text axis + 3 mRoPE axes (the 4.57+ API for packed inputs); no batch file: the batch
        # format holds position ids of rank <= 3
        "packed_4d": {"input_ids": torch.randint(3, 59, (1, 7), generator=g),
                      "position_ids": torch.tensor([[packed]] * 4)},
    }
    results = []
    for name, inputs in scenarios.items():
        calls.append({"scenario": name, "inputs": {k: {"shape": list(v.shape), "values": v.tolist()}
                                                   for k, v in inputs.items() if k != "input_ids"},
                      "calls": []})
        try:
            with torch.no_grad():
                model(**inputs)
            calls[-1]["outcome"] = {"status": "ok"}
        except Exception as exc:
            calls[-1]["outcome"] = {"status": "error", "error": tracing.describe_exception(exc)}
    Path(args.out).write_text(json.dumps({"environment": env, "scenarios": calls}, indent=1))


if __name__ == "__main__":
    main()
