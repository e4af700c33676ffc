"""Hybrid-model goldens (parity.py hybrid): tests/golden/hybrid-qwen3next-<release>.json, a tiny
random Qwen3-Next's forward on a packed row, recording the boundaries each layer receives
(driver_hybrid.py). Each scenario is described by a batch file (batches 080-082, model level,
with `layers`) that `write_batches` writes from SCENARIOS; tests/test_convert_golden.cpp replays
them."""

import scenario_goldens

# <= 5.8: no boundaries reach the GatedDeltaNet layers; from 5.9.0 cu_seq_lens_q and seq_idx do
# (huggingface/transformers PR#45034)
RELEASES = ["5.5.0", "5.8.1", "5.9.0", "5.16.0", "5.20.0", "5.24.0"]

LENGTHS = [3, 2, 4]
FLASH_KWARGS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")

CONFIG = {
    "vocab_size": 64, "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "full_attention_interval": 2,
    "max_position_embeddings": 128, "pad_token_id": 0,
}

# name -> (batch file, what the caller passes besides input_ids and position ids)
SCENARIOS = {
    # position ids restarting at 0 only: the attention layers split the row, nothing else does
    "position_ids": {"batch": "080-qwen3next-packed-position-ids.json"},
    # a collator's flash kwargs (DataCollatorWithFlattening, return_flash_attn_kwargs)
    "flash_kwargs": {"batch": "081-qwen3next-packed-flash-kwargs.json", "flash_kwargs": True},
    # ... and its seq_idx (return_seq_idx)
    "flash_kwargs_seq_idx": {"batch": "082-qwen3next-packed-flash-kwargs-seq-idx.json", "flash_kwargs": True,
                             "seq_idx": True},
}


def position_ids():
    return [i for n in LENGTHS for i in range(n)]


def cu_seqlens():
    out = [0]
    for n in LENGTHS:
        out.append(out[-1] + n)
    return out


def model_kwargs(spec):
    """The scenario's kwargs as lists (int32 tensors in the driver) and host ints."""
    out = {}
    if spec.get("flash_kwargs"):
        out.update(cu_seq_lens_q=cu_seqlens(), cu_seq_lens_k=cu_seqlens(), max_length_q=max(LENGTHS),
                   max_length_k=max(LENGTHS))
    if spec.get("seq_idx"):
        out["seq_idx"] = [[k for k, n in enumerate(LENGTHS) for _ in range(n)]]
    return out


def batch_for(name, spec):
    kwargs = model_kwargs(spec)
    batch = {"position_ids": {"values": [position_ids()], "level": "model"}}
    flash = {k: kwargs[k] for k in FLASH_KWARGS if k in kwargs}
    if flash:
        batch["flash_kwargs"] = flash
    if "seq_idx" in kwargs:
        batch["seq_idx"] = kwargs["seq_idx"]
    return {
        "format": "attn-doctor/batch@1",
        "name": "qwen3next-" + name.replace("_", "-"),
        "description": "Model level: a tiny Qwen3-Next's forward (flash_attention_2) on one packed row of "
                       "three sequences (3, 2, 4), position ids restarting at 0"
                       + (", the collator's flash kwargs" if flash else "")
                       + (" and seq_idx" if "seq_idx" in kwargs else "")
                       + "; tools/parity/hybrid.py, goldens tests/golden/hybrid-qwen3next-<release>.json.",
        "environment": {"flash_attn": "2.6.3"},
        "model": {"num_heads": CONFIG["num_attention_heads"], "num_kv_heads": CONFIG["num_key_value_heads"],
                  "head_dim": CONFIG["head_dim"], "hidden_size": CONFIG["hidden_size"], "dtype": "bf16",
                  "architecture": "qwen3_next"},
        "batch": batch,
        "layers": [{"kind": "gated_deltanet", "count": 1}, {"kind": "attention", "count": 1}],
    }


def write_batches(batches_dir, dumps):
    scenario_goldens.write_batches(SCENARIOS, batch_for, batches_dir, dumps)


def run(run_python, standin, python_for, site_for, golden_dir, batches_dir, dumps, cache, only=None):
    write_batches(batches_dir, dumps)
    scenario_goldens.write(
        "hybrid-qwen3next", RELEASES, only,
        scenario_goldens.recorder(run_python, "driver_hybrid.py", cache, "hybrid",
                                  lambda r: [standin("2.6.3"), site_for(r)], lambda r: python_for(r, "hybrid")),
        scenario_goldens.transformers_header(
            "attn-doctor/golden-hybrid@1", "transformers.Qwen3NextForCausalLM.forward (random init, use_cache=False)",
            command=lambda r, env: f"python tools/parity/parity.py hybrid --releases {r}",
            config=lambda r, env: env["config"], layer_types=lambda r, env: env["layer_types"]),
        {name: spec["batch"] for name, spec in SCENARIOS.items()}, golden_dir, dumps)
