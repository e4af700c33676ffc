"""FLA's GatedDeltaNet layer (fla/layers/gated_deltanet.py) on one flash-linear-attention
release: which sequence boundaries its kernels receive for a caller's `cu_seqlens` and
attention mask.

Each scenario (fla_layer.SCENARIOS) is one forward of a tiny layer (hidden 64, 4 heads of 16,
float32, CPU) on hidden states (B, T, 64) with the scenario's `attention_mask` and `cu_seqlens`.
Recorded, in call order:

  unpad       what the layer's unpadding returned (`get_unpad_data` up to 0.4.2,
              `unpad_hidden_states` from 0.6.0; where the release has it): the gather indices
              and cu_seqlens
  conv1d      each ShortConvolution call's `cu_seqlens` (its Triton kernel cannot run on CPU:
              the input is handed back unchanged)
  delta_rule  the delta-rule kernel's `cu_seqlens` and q's shape (`fused_recurrent_gated_delta_rule`
              in eval on these short rows, else `chunk_gated_delta_rule`); the run then stops
              there (a Triton kernel), outcome `stopped_at_kernel`.
"""

import importlib
import importlib.metadata
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fla_layer  # noqa: E402
import tracing  # noqa: E402


class StopAtKernel(Exception):
    pass


def tensor(v):
    if not isinstance(v, torch.Tensor):
        return v
    return {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape), "values": v.tolist()}


def main():
    args = tracing.start_driver()
    patches = []
    # FLA decorates its kernels with triton.autotune at import, which asks Triton for the active
    # GPU driver; none exists on a CPU-only machine. A placeholder driver lets the modules import
    # (no kernel runs: the forward stops before the first one).
    from triton.runtime import driver as triton_driver
    from unittest import mock
    if not torch.cuda.is_available():
        placeholder = mock.MagicMock(name="no-gpu-driver")
        placeholder.get_current_target.return_value.backend = "cpu"
        placeholder.utils.get_device_properties.return_value = {"multiprocessor_count": 1, "max_shared_mem": 0}
        triton_driver.set_active(placeholder)
        patches.append("triton.runtime.driver: a placeholder active driver with backend 'cpu' (CPU-only machine; "
                       "FLA's modules ask for one at import; no Triton kernel runs)")
    m = importlib.import_module("fla.layers.gated_deltanet")
    from fla.modules import ShortConvolution

    calls = []

    # the layer runs fused_recurrent in eval on short rows (q_len <= 64), chunk otherwise
    for kernel in ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"):
        def stop(q, k, v, *a, _kernel=kernel, **kw):
            calls[-1]["calls"].append({"layer": "delta_rule", "kernel": _kernel, "q_shape": list(q.shape),
                                       "cu_seqlens": tensor(kw.get("cu_seqlens"))})
            raise StopAtKernel()

        setattr(m, kernel, stop)
        patches.append(f"fla.layers.gated_deltanet.{kernel}: records its arguments, then stops the forward "
                       "(a Triton kernel; CPU-only machine)")

    def conv_forward(self, x, *a, **kw):
        calls[-1]["calls"].append({"layer": "conv1d", "x_shape": list(x.shape), "cu_seqlens": tensor(kw.get("cu_seqlens"))})
        return x, None

    ShortConvolution.forward = conv_forward
    patches.append("fla.modules.ShortConvolution.forward: records its cu_seqlens and hands its input back (a Triton "
                   "kernel; CPU-only machine)")

    for name, picks in (("get_unpad_data", lambda r: (r[0], r[1])), ("unpad_hidden_states", lambda r: (r[1], r[2]))):
        if not hasattr(m, name):
            continue
        original = getattr(m, name)

        def unpad(*a, _original=original, _picks=picks, _name=name, **kw):
            result = _original(*a, **kw)
            indices, cu = _picks(result)
            calls[-1]["calls"].append({"layer": "unpad", "function": _name, "indices": tensor(indices),
                                       "cu_seqlens": tensor(cu)})
            return result

        setattr(m, name, unpad)
        patches.append(f"fla.layers.gated_deltanet.{name}: wrapped to record its outputs (behaviour unchanged)")

    layer = m.GatedDeltaNet(**fla_layer.LAYER)
    layer.eval()
    results = []
    for name, spec in fla_layer.SCENARIOS.items():
        B, T = spec["shape"]
        hidden = torch.randn(B, T, fla_layer.LAYER["hidden_size"])
        kwargs = {}
        if "attention_mask" in spec:
            kwargs["attention_mask"] = torch.tensor(spec["attention_mask"])
        if "cu_seqlens" in spec:
            kwargs["cu_seqlens"] = torch.tensor(spec["cu_seqlens"], dtype=torch.int32)
        results.append({"scenario": name, "inputs": {k: tensor(v) for k, v in kwargs.items()}, "calls": []})
        calls.append(results[-1])
        try:
            with torch.no_grad():
                layer(hidden, **kwargs)
            results[-1]["outcome"] = {"status": "ok"}
        except StopAtKernel:
            results[-1]["outcome"] = {"status": "stopped_at_kernel"}
        except Exception as exc:
            results[-1]["outcome"] = {"status": "error", "error": tracing.describe_exception(exc)}
    env = {"torch": torch.__version__, "python": sys.version.split()[0],
           "fla": importlib.metadata.version("flash-linear-attention"), "patches": patches}
    Path(args.out).write_text(json.dumps({"environment": env, "scenarios": results}, indent=1))


if __name__ == "__main__":
    main()
