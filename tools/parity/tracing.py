"""Hooks shared by the parity drivers: make transformers see the stand-in flash_attn, wrap
the release's own unpad helpers so their outputs (gather indices, cu_seqlens, max_seqlen) are
recorded even when the release fails before reaching flash-attn, and summarise a case.

Every patch applied is listed in the golden's `environment.patches`.
"""

import argparse
import functools
import importlib
import importlib.util
import importlib.metadata
import inspect
import sys
import traceback

import torch

PATCHES = []
_POSIDS_HELPERS = (
    "prepare_fa2_from_position_ids",
    "_prepare_flash_attention_from_position_ids",
    "_prepare_from_posids",
    "prepare_fa_kwargs_from_position_ids",
)


def _record(kind, **fields):
    from flash_attn import _recorder
    return _recorder.record(kind, **fields)


def _int(value):
    from flash_attn import _recorder
    return _recorder.describe_int_tensor(value)


def _max(value):
    from flash_attn import _recorder
    return _recorder.describe_max_seqlen(value)


def reset():
    pass


def patch_availability():
    """transformers only routes to flash-attn when it believes flash-attn 2 is usable, which
    includes `torch.cuda.is_available()`. This machine has no GPU, so the check is forced."""
    import transformers.utils as tu
    import transformers.utils.import_utils as iu

    def available(*args, **kwargs):
        return True

    for module in (tu, iu):
        if hasattr(module, "is_flash_attn_2_available"):
            setattr(module, "is_flash_attn_2_available", available)
    PATCHES.append(
        "transformers.utils(.import_utils).is_flash_attn_2_available -> True "
        "(the release's check also requires torch.cuda.is_available(); CPU-only machine)"
    )
    return {
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "transformers": importlib.metadata.version("transformers"),
        "flash_attn_standin": importlib.metadata.version("flash_attn"),
        "patches": PATCHES,
    }


def _wrap_unpad_data(module, name):
    original = getattr(module, name)

    @functools.wraps(original)
    def wrapper(attention_mask, *args, **kwargs):
        indices, cu_seqlens, max_seqlen = original(attention_mask, *args, **kwargs)
        _record("get_unpad_data", mask_shape=list(attention_mask.shape),
                indices=_int(indices), cu_seqlens=_int(cu_seqlens), max_seqlen=_max(max_seqlen))
        return indices, cu_seqlens, max_seqlen

    setattr(module, name, wrapper)
    PATCHES.append(f"{module.__name__}.{name}: wrapped to record its outputs (behaviour unchanged)")


def _wrap_upad_input(owner, name, label, is_method):
    original = getattr(owner, name)

    def note(result):
        _, _, _, indices_q, (cu_q, cu_k), (max_q, max_k) = result
        _record("upad_input", indices_q=_int(indices_q), cu_seqlens_q=_int(cu_q), cu_seqlens_k=_int(cu_k),
                max_seqlen_q=_max(max_q), max_seqlen_k=_max(max_k))
        return result

    if is_method:
        @functools.wraps(original)
        def wrapper(self, *args, **kwargs):
            return note(original(self, *args, **kwargs))
    else:
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            return note(original(*args, **kwargs))

    setattr(owner, name, wrapper)
    PATCHES.append(f"{label}.{name}: wrapped to record its outputs (behaviour unchanged)")


def _wrap_posids(module, name):
    original = getattr(module, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        _record("position_ids_helper", name=name)
        return result

    setattr(module, name, wrapper)
    PATCHES.append(f"{module.__name__}.{name}: wrapped to note that it ran (behaviour unchanged)")


def wrap_module_helpers(module):
    """Record the outputs of transformers.modeling_flash_attention_utils' unpad and position-ids
    helpers (all global lookups inside the module, so replacing the attributes is enough)."""
    _wrap_unpad_data(module, "_get_unpad_data")
    _wrap_upad_input(module, "_upad_input", module.__name__, False)
    for name in _POSIDS_HELPERS:
        if hasattr(module, name):
            _wrap_posids(module, name)


def wrap_entry_point(original, recorded, env, modules):
    """Replace `_flash_attention_forward` by `recorded` wherever a model module imported it by name."""
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "_flash_attention_forward", None) is original:
            module._flash_attention_forward = recorded
            env["patches"].append(f"{name}._flash_attention_forward: wrapped to record each call's inputs and "
                                  "outcome (behaviour unchanged)")


def start_driver():
    """Every driver's start: its --out argument, and torch seeded on one thread. Returns args."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    return args


def start_model_driver():
    """The prelude every model driver shares: its --out argument, torch seeded on one thread, and
    the stand-in flash_attn made visible and computing attention (so the model's forward goes on).
    Returns (args, env)."""
    args = start_driver()
    env = patch_availability()
    from flash_attn import _recorder
    _recorder.COMPUTE = True
    return args, env


def record_flash_attention_forward(env, modules, describe, sink):
    """Wrap transformers.modeling_flash_attention_utils._flash_attention_forward (and its unpad and
    position-ids helpers) where the model `modules` imported it: each call appends
    describe(query, key, value, attention_mask, query_length, kwargs) to sink(), completed with
    what reached the stand-in flash-attn or the exception the release raised."""
    from flash_attn import _recorder
    fau = importlib.import_module("transformers.modeling_flash_attention_utils")
    wrap_module_helpers(fau)
    original = fau._flash_attention_forward

    @functools.wraps(original)
    def recorded(query_states, key_states, value_states, attention_mask, query_length, *a, **kw):
        start = len(_recorder.CALLS)
        entry = describe(query_states, key_states, value_states, attention_mask, query_length, kw)
        sink().append(entry)
        error = None
        try:
            return original(query_states, key_states, value_states, attention_mask, query_length, *a, **kw)
        except Exception as exc:
            error = describe_exception(exc)
            raise
        finally:
            entry.update(summarise(_recorder.CALLS[start:], None, error))

    wrap_entry_point(original, recorded, env, modules)


class Target:
    """The conversion entry point of one release."""

    def __init__(self):
        self.last_ignored = []
        self.last_output = None
        try:
            self.module = importlib.import_module("transformers.modeling_flash_attention_utils")
            self.level = "function"
        except ModuleNotFoundError:
            self.module = importlib.import_module("transformers.models.llama.modeling_llama")
            self.level = "model"
        if self.level == "function":
            self.fn = self.module._flash_attention_forward
            wrap_module_helpers(self.module)
        else:
            cls = self.module.LlamaFlashAttention2
            _wrap_unpad_data(self.module, "_get_unpad_data")
            _wrap_upad_input(cls, "_upad_input", "LlamaFlashAttention2", True)
            attn = cls.__new__(cls)
            torch.nn.Module.__init__(attn)
            attn._flash_attn_uses_top_left_mask = False
            self.attn = attn
            self.fn = attn._flash_attention_forward
        self.params = inspect.signature(self.fn).parameters
        self.var_kw = any(p.kind == p.VAR_KEYWORD for p in self.params.values())

    def integration_passes_implementation(self):
        try:
            spec = importlib.util.find_spec("transformers.integrations.flash_attention")
        except ModuleNotFoundError:
            return False
        if spec is None or spec.origin is None:
            return False
        with open(spec.origin) as f:
            return "attn_implementation=module.config._attn_implementation" in f.read()

    def describe(self):
        if self.level == "function":
            return {"loaded": "whole", "entry_point": "transformers.modeling_flash_attention_utils._flash_attention_forward"}
        return {"loaded": "whole",
                "entry_point": "transformers.models.llama.modeling_llama.LlamaFlashAttention2._flash_attention_forward",
                "note": "this release has no transformers.modeling_flash_attention_utils; the per-model copy "
                        "(Llama) is the conversion. It takes no position_ids, sliding_window, softcap or varlen "
                        "kwargs (listed per case under ignored_arguments). num_heads, num_key_value_heads, "
                        "head_dim, is_causal are set on a bare LlamaFlashAttention2 from the batch's model block."}

    def call(self, case, qkv=None):
        """Run the release's conversion on the batch; `qkv` = (q, k, v) to use instead of the
        seeded CPU tensors of batchfile.make_qkv (tools/oracle passes CUDA tensors). Returns the
        arguments the release does not accept; the release's return value is `self.last_output`."""
        q, k, v = qkv if qkv is not None else _batchfile().make_qkv(case)
        model = case["model"]
        wanted = {
            "dropout": model.get("dropout", 0.0),
            "position_ids": case["position_ids"],
            "sliding_window": model.get("sliding_window"),
            "softcap": model.get("softcap"),
        }
        for key, value in case["flash_kwargs"].items():
            wanted[key] = torch.tensor(value, dtype=torch.int32, device=q.device) if isinstance(value, list) else value
        position_ids = wanted["position_ids"]
        if isinstance(position_ids, torch.Tensor) and position_ids.device != q.device:
            wanted["position_ids"] = position_ids.to(q.device)
        kwargs, ignored = {}, []
        for key, value in wanted.items():
            if key in self.params or self.var_kw:
                if value is not None or key in self.params:
                    kwargs[key] = value
            elif value is not None:
                ignored.append(key)
        self.last_ignored = ignored
        if self.level == "function" and self.integration_passes_implementation():
            # what transformers.integrations.flash_attention passes (>= 4.53); 5.x needs it
            kwargs["attn_implementation"] = "flash_attention_2"
        causal = model.get("causal", True)
        mask = case["attention_mask"]
        if mask is not None and mask.device != q.device:
            mask = mask.to(q.device)
        if self.level == "function":
            self.last_output = self.fn(q, k, v, mask, case["query_length"], causal, **kwargs)
        else:
            self.attn.is_causal = causal
            self.attn.num_heads = model["num_heads"]
            self.attn.num_key_value_heads = model.get("num_kv_heads", model["num_heads"])
            self.attn.head_dim = model["head_dim"]
            self.last_output = self.fn(q, k, v, mask, case["query_length"], **kwargs)
        return ignored


def _batchfile():
    return importlib.import_module("batchfile")


def load_target():
    return Target()


def describe_exception(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    chain = []
    for frame in frames:
        file = frame.filename.replace("\\", "/")
        if "/transformers/" in file or "/flash_attn" in file or "/fla/" in file:
            chain.append(frame.name)
    last = frames[-1] if frames else None
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "where": " > ".join(chain),
        "line": (last.line or "").strip() if last else "",
    }


def summarise(calls, case, error):
    unpad = next((c for c in calls if c["kind"] == "get_unpad_data"), None)
    upad = next((c for c in calls if c["kind"] == "upad_input"), None)
    posids = any(c["kind"] == "position_ids_helper" for c in calls)
    varlen = next((c for c in calls if c["kind"] == "flash_attn_varlen_func"), None)
    dense = next((c for c in calls if c["kind"] == "flash_attn_func"), None)
    q_unpad = next((c for c in calls if c["kind"] == "unpad_input"), None)
    if unpad is not None:
        path = "mask"
    elif posids:
        path = "position_ids"
    elif varlen is not None:
        path = "kwargs"
    elif dense is not None:
        path = "dense"
    else:
        path = None
    result = None
    if varlen is not None:
        result = {
            "path": path,
            "function": "flash_attn_varlen_func",
            "cu_seqlens_q": varlen["cu_seqlens_q"],
            "cu_seqlens_k": varlen["cu_seqlens_k"],
            "max_seqlen_q": varlen["max_seqlen_q"],
            "max_seqlen_k": varlen["max_seqlen_k"],
            "total_q": varlen["q_shape"][0],
            "total_k": varlen["k_shape"][0],
            "indices_q": upad["indices_q"] if (upad and path == "mask") else None,
            "indices_k": unpad["indices"] if (unpad and path == "mask") else None,
        }
        call = varlen
    elif dense is not None:
        result = {
            "path": "dense", "function": "flash_attn_func",
            "cu_seqlens_q": None, "cu_seqlens_k": None, "max_seqlen_q": None, "max_seqlen_k": None,
            "total_q": None, "total_k": None, "indices_q": None, "indices_k": None,
        }
        call = dense
    if result is not None:
        result.update({
            "q_shape": call["q_shape"], "k_shape": call["k_shape"],
            "causal": call["causal"], "window_size": call["window_size"],
            "softcap": call["softcap"], "dropout": call["dropout_p"],
        })
    partial = None
    if error is not None and path is not None:
        partial = {"path": path}
        if unpad is not None:
            partial.update({"indices_k": unpad["indices"], "cu_seqlens_k": unpad["cu_seqlens"],
                            "max_seqlen_k": unpad["max_seqlen"]})
        if q_unpad is not None:
            partial.update({"indices_q": q_unpad["indices"], "cu_seqlens_q": q_unpad["cu_seqlens"],
                            "max_seqlen_q": q_unpad["max_seqlen"]})
    return {"result": result, "partial": partial, "error": error}
