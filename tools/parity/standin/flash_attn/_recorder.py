"""Call log of the stand-in flash_attn package.

Every entry point of the stand-in appends one plain dict here instead of launching a kernel.
The parity drivers clear `CALLS` before each case and read it afterwards.
`COMPUTE` switches the attention functions from "return zeros of the right shape" to
"compute attention in plain torch" (needed for `generate`, whose next token depends on it).
"""

import torch

CALLS = []
COMPUTE = False


def describe_int_tensor(value):
    """cu_seqlens / indices / max_seqlen as JSON: dtype, shape, device and values."""
    if isinstance(value, torch.Tensor):
        return {
            "dtype": str(value.dtype).replace("torch.", ""),
            "shape": list(value.shape),
            "device": str(value.device),
            "values": value.detach().cpu().reshape(-1).tolist(),
        }
    return value


def describe_max_seqlen(value):
    """max_seqlen reaches flash-attn either as a host int or as a 0-d tensor."""
    if isinstance(value, torch.Tensor):
        return {
            "value": int(value.item()) if value.numel() == 1 else value.tolist(),
            "is_tensor": True,
            "dtype": str(value.dtype).replace("torch.", ""),
            "shape": list(value.shape),
        }
    return {"value": value, "is_tensor": False, "python_type": type(value).__name__}


def shape_of(t):
    return list(t.shape) if isinstance(t, torch.Tensor) else None


def record(kind, **fields):
    entry = {"kind": kind}
    entry.update(fields)
    CALLS.append(entry)
    return entry
