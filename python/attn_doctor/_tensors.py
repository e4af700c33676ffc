"""Duck-typed access to tensor-like objects (torch tensors, or the fakes the tests use).

The package never imports torch: it reads `shape`, `dtype`, `device`, `stride()`, `dim()`,
`item()` and `tolist()` from whatever object the hooked function received. Only small index
tensors (masks, position ids, cu_seqlens, offsets) are ever copied to the host; q/k/v are
described by their metadata alone.
"""
from __future__ import annotations

import sys
from typing import Any, List, Optional, Tuple

# torch dtype names (the part after "torch.") -> batch-format names.
_DTYPE_NAMES = {
    "float16": "fp16", "half": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64",
    "float8_e4m3fn": "fp8_e4m3", "float8_e4m3fnuz": "fp8_e4m3",
    "int8": "int8", "int16": "int16", "short": "int16",
    "int32": "int32", "int": "int32",
    "int64": "int64", "long": "int64",
    "uint8": "uint8", "bool": "bool",
}

MODEL_DTYPES = ("fp16", "bf16", "fp32", "fp8_e4m3")


def is_tensor(x: Any) -> bool:
    return (x is not None and not isinstance(x, (bool, int, float, str, bytes))
            and hasattr(x, "shape") and hasattr(x, "dtype"))


def shape(t: Any) -> List[int]:
    return [int(s) for s in t.shape]


def ndim(t: Any) -> int:
    return len(t.shape)


def numel(t: Any) -> int:
    n = 1
    for s in t.shape:
        n *= int(s)
    return n


# dtype / device objects seen -> their names (the guard asks for them on every call)
_NAME_CACHE: dict = {}


def dtype_name(t_or_dtype: Any) -> str:
    d = getattr(t_or_dtype, "dtype", t_or_dtype)
    try:
        return _NAME_CACHE[("dtype", d)]
    except (KeyError, TypeError):
        pass
    name = str(d).rsplit(".", 1)[-1]
    name = _DTYPE_NAMES.get(name, name)
    try:
        _NAME_CACHE[("dtype", d)] = name
    except TypeError:  # an unhashable dtype object: not cached
        pass
    return name


def is_floating(t: Any) -> bool:
    return dtype_name(t) in ("fp16", "bf16", "fp32", "fp64", "fp8_e4m3")


def device_name(t: Any) -> str:
    dev = getattr(t, "device", None)
    if dev is None:
        return "cpu"
    try:
        return _NAME_CACHE[("device", dev)]
    except (KeyError, TypeError):
        pass
    s = str(dev)
    name = "cuda:0" if s == "cuda" else s
    try:
        _NAME_CACHE[("device", dev)] = name
    except TypeError:
        pass
    return name


def last_dim_contiguous(t: Any) -> bool:
    stride = getattr(t, "stride", None)
    if stride is None:
        return True
    try:
        st = stride()
        return len(st) == 0 or int(st[-1]) == 1 or int(t.shape[-1]) == 1
    except Exception:
        return True


def host_list(t: Any) -> Any:
    """Nested Python lists of `t`'s values (one device-to-host copy for a device tensor)."""
    detach = getattr(t, "detach", None)
    if detach is not None:
        t = detach()
    return t.tolist()


def flatten(nested: Any) -> List[Any]:
    if not isinstance(nested, list):
        return [nested]
    if not nested or not isinstance(nested[0], list):
        return nested  # a 1-D tensor's tolist(): flat already (tolist() is never ragged)
    out: List[Any] = []
    stack = [iter(nested)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            out.append(item)
        else:
            stack.pop()
    return out


def scalar_arg(x: Any) -> Tuple[Optional[int], bool]:
    """(value, given_as_tensor) for an int-or-0-d-tensor argument such as max_seqlen."""
    if x is None:
        return None, False
    if is_tensor(x):
        v = x.item() if ndim(x) == 0 else flatten(host_list(x))[0]
        return int(v), True
    return int(x), False


def is_compiling() -> bool:
    """True inside torch.compile tracing: hooks then pass straight through (reading values
    would add graph breaks and host syncs to the compiled graph)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        compiler = getattr(torch, "compiler", None)
        if compiler is not None and hasattr(compiler, "is_compiling"):
            return bool(compiler.is_compiling())
        dynamo = getattr(torch, "_dynamo", None)
        return bool(dynamo is not None and dynamo.is_compiling())
    except Exception:
        return False
