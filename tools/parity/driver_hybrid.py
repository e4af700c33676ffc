"""A tiny Qwen3-Next (GatedDeltaNet and attention layers, flash_attention_2) on one transformers
release: which sequence boundaries reach each layer of a packed row.

Each scenario (hybrid.SCENARIOS) is one forward pass of input_ids (1, 9) holding three packed
sequences (3, 2, 4) with position ids restarting at 0, and the scenario's flash kwargs and
seq_idx. Recorded per layer, in call order:

  attention   every `_flash_attention_forward` call: the mask, position ids and flash kwargs it
              was given and what reached the stand-in flash-attn (cu_seqlens, gather indices)
  delta_rule  the chunked gated delta rule: the `cu_seqlens` it was handed (the release's own
              torch_chunk_gated_delta_rule runs; it takes cu_seqlens into **kwargs and ignores it)
  conv1d      the short convolution: the `seq_idx` it was handed. Where the release calls
              `causal_conv1d_fn` only when the causal-conv1d package is installed (an attribute of
              the layer, None without it), a stand-in with that signature computes the same
              convolution in plain torch and records its arguments, so the call the package would
              receive is seen.

A tiny randomly initialised model (2 layers: linear_attention, full_attention; bf16).
"""

import functools
import importlib
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hybrid  # noqa: E402
import tracing  # noqa: E402


def tensor_or_value(v):
    if isinstance(v, torch.Tensor):
        return {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape), "values": v.tolist()}
    return v


def describe_attention(query_states, key_states, value_states, attention_mask, query_length, kw):
    pos = kw.get("position_ids")
    return {"layer": "attention", "q_shape": list(query_states.shape), "k_shape": list(key_states.shape),
            "attention_mask": None if attention_mask is None else
            {"shape": list(attention_mask.shape), "dtype": str(attention_mask.dtype).replace("torch.", ""),
             "values": attention_mask.to(torch.int64).tolist()},
            "position_ids": None if pos is None else {"shape": list(pos.shape), "values": pos.tolist()},
            "flash_kwargs": {k: tensor_or_value(kw[k]) for k in hybrid.FLASH_KWARGS if kw.get(k) is not None}}


def conv_standin(x, weight, bias=None, activation=None, seq_idx=None, **kwargs):
    """causal_conv1d_fn's signature (x (B, D, T), weight (D, W)), computed as the release's
    fallback does: a depthwise causal conv over the whole row."""
    out = F.conv1d(x.to(weight.dtype), weight.unsqueeze(1), bias, padding=weight.shape[-1] - 1,
                   groups=x.shape[1])[:, :, : x.shape[-1]]
    if activation is not None:
        out = F.silu(out)
    return out.to(x.dtype)


CURRENT = {"layer_idx": None}  # the GatedDeltaNet layer running (a forward pre-hook sets it)


def recorder(op, layer_idx, fn, implementation, sink, fields):
    @functools.wraps(fn)
    def wrapped(*a, **kw):
        entry = {"layer": op, "layer_idx": CURRENT["layer_idx"] if layer_idx is None else layer_idx, "implementation": implementation,
                 "kwargs": sorted(k for k, v in kw.items() if v is not None)}
        for name in fields:
            entry[name] = tensor_or_value(kw.get(name))
        first = a[0] if a else kw.get("query", kw.get("x", kw.get("hidden_states")))
        entry["input_shape"] = list(first.shape) if isinstance(first, torch.Tensor) else None
        sink().append(entry)
        return fn(*a, **kw)
    return wrapped


def wrap_linear_layers(model, mq, env, sink):
    """Record the delta rule and the conv of every GatedDeltaNet layer: the layer's own attribute
    where the release keeps the op there (set in __init__), else the module-level function its
    forward calls."""
    module_level = {}
    for layer in model.model.layers:
        lin = getattr(layer, "linear_attn", None)
        if lin is None:
            continue
        idx = lin.layer_idx
        lin.register_forward_pre_hook(lambda module, a: CURRENT.update(layer_idx=module.layer_idx))
        if hasattr(lin, "chunk_gated_delta_rule"):
            fn = lin.chunk_gated_delta_rule
            lin.chunk_gated_delta_rule = recorder("delta_rule", idx, fn, fn.__name__, sink, ("cu_seqlens",))
            module_level.setdefault("delta", f"{type(lin).__name__}.chunk_gated_delta_rule (attribute): wrapped "
                                             "to record its arguments (behaviour unchanged)")
        else:
            module_level["delta_global"] = "torch_chunk_gated_delta_rule"
        if hasattr(lin, "causal_conv1d_fn"):
            fn = lin.causal_conv1d_fn
            if fn is None:
                lin.causal_conv1d_fn = recorder("conv1d", idx, conv_standin, "causal_conv1d_fn stand-in", sink,
                                                ("seq_idx",))
                module_level.setdefault("conv", f"{type(lin).__name__}.causal_conv1d_fn (attribute, None without "
                                                "the causal-conv1d package): a stand-in of its signature computing "
                                                "the release's fallback convolution, recording its arguments")
            else:
                lin.causal_conv1d_fn = recorder("conv1d", idx, fn, fn.__name__, sink, ("seq_idx",))
        else:
            module_level["conv_global"] = "causal_conv1d_fn"
    # module-level functions the forward looks up as globals (5.24: torch_chunk_gated_delta_rule,
    # causal_conv1d_fn with **kwargs)
    for key, name, op, fields in (("delta_global", "torch_chunk_gated_delta_rule", "delta_rule", ("cu_seqlens",)),
                                  ("conv_global", "causal_conv1d_fn", "conv1d", ("seq_idx",))):
        if key in module_level:
            fn = getattr(mq, name)
            setattr(mq, name, recorder(op, None, fn, name, sink, fields))
            module_level[key] = f"{mq.__name__}.{name}: wrapped to record its arguments (behaviour unchanged)"
    env["patches"].extend(v for v in module_level.values())


def main():
    args, env = tracing.start_model_driver()
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    mq = importlib.import_module("transformers.models.qwen3_next.modeling_qwen3_next")
    calls = []
    tracing.record_flash_attention_forward(env, ("transformers.models.qwen3_next.modeling_qwen3_next",
                                                 "transformers.integrations.flash_attention"),
                                           describe_attention, lambda: calls[-1]["calls"])
    config = Qwen3NextConfig(**hybrid.CONFIG)
    torch.manual_seed(0)
    model = Qwen3NextForCausalLM._from_config(config, attn_implementation="flash_attention_2",
                                              torch_dtype=torch.bfloat16)
    model.eval()
    wrap_linear_layers(model, mq, env, lambda: calls[-1]["calls"])
    g = torch.Generator().manual_seed(1)
    results = []
    for name, spec in hybrid.SCENARIOS.items():
        inputs = {"input_ids": torch.randint(3, 59, (1, sum(hybrid.LENGTHS)), generator=g),
                  "position_ids": torch.tensor([hybrid.position_ids()])}
        extra = hybrid.model_kwargs(spec)
        results.append({"scenario": name,
                        "inputs": {k: tensor_or_value(v) for k, v in {**inputs, **extra}.items() if k != "input_ids"},
                        "calls": []})
        calls.append(results[-1])
        inputs.update({k: (torch.tensor(v, dtype=torch.int32) if isinstance(v, list) else v)
                       for k, v in extra.items()})
        try:
            with torch.no_grad():
                model(**inputs, use_cache=False)
            results[-1]["outcome"] = {"status": "ok"}
        except Exception as exc:
            results[-1]["outcome"] = {"status": "error", "error": tracing.describe_exception(exc)}
    env["config"] = {k: v for k, v in hybrid.CONFIG.items()}
    env["layer_types"] = list(config.layer_types)
    Path(args.out).write_text(json.dumps({"environment": env, "scenarios": results}, indent=1))


if __name__ == "__main__":
    main()
