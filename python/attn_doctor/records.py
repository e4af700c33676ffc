"""Batch documents built from the arguments of one hooked call.

One builder per entry point:

  transformers  `_flash_attention_forward(query_states, key_states, value_states,
                attention_mask, query_length, ...)` (>= 4.42, module function) and the
                model-level `XFlashAttention2._flash_attention_forward(self, ...)` (<= 4.41).
                q is (B, Lq, H, D), k/v (B, Lk, Hk, D). Writes what the framework held: the
                `batch` block (mask, position ids, lengths, explicit `flash_kwargs`), never the
                cu_seqlens transformers derives from them, so that `attn-doctor check` replays
                the conversion instead of reading back its answer.
  flash_attn    `flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                max_seqlen_k, ...)`: q (total_q, H, D). Writes the `varlen` block as passed.
                `flash_attn_func(q, k, v, ...)`: q (B, Lq, H, D). Writes a dense `batch` block.
  torch         `torch.nn.attention.varlen.varlen_attn(query, key, value, cu_seq_q, cu_seq_k,
                max_q, max_k, *, ...)`: the same `varlen` block, with `api`
                "torch.varlen_attn", the window as passed and the GPU architecture.
  fla           `RotaryEmbedding.forward(self, q, k, seqlen_offset, cu_seqlens, max_seqlen)`:
                q (B, T, H, D). Writes the `rotary` block (and `varlen` with cu_seqlens).

Each builder runs *before* the real call, so a call that kills the CUDA context (a
device-side assert) can still be written: everything it needs is already on the host.
"""
from __future__ import annotations

import inspect
import sys
from typing import Any, Dict, List, Optional, Tuple

from . import te_thd
from . import _tensors as T
from . import hooks
from .batchfile import FORMAT, Encoder

# model_type values whose positions start at padding_idx + 1 (RoBERTa-style embeddings)
_ROBERTA_LIKE = {"roberta", "xlm-roberta", "xlm_roberta", "camembert", "roberta-prelayernorm",
                 "roberta_prelayernorm", "xmod", "data2vec-text", "data2vec_text", "longformer",
                 "markuplm", "ibert", "mpnet"}

# (batch-file key, module whose __version__ is read, distributions asked otherwise, whether
# only a module the run has imported counts). flash-attn 4 (the CuTe DSL kernels,
# `flash_attn.cute`) and flash-linear-attention (`fla`, from the flash-linear-attention or
# fla-core distribution) are recorded only when the run loaded them: installed but unused,
# they say nothing about the call.
_VERSION_SOURCES = (("transformers", "transformers", ("transformers",), False),
                    ("flash_attn", "flash_attn", ("flash-attn",), False),
                    ("flash_attn_4", "flash_attn.cute", ("flash-attn-4",), True),
                    ("fla", "fla", ("flash-linear-attention", "fla-core"), True),
                    ("torch", "torch", ("torch",), False),
                    ("triton", "triton", ("triton",), False))


# id(fn) -> (fn, names of the positional parameters in order (None: bind with inspect), name
# of **kwargs or None); the function is kept so that its id cannot be reused.
_SIGNATURES: Dict[int, Tuple[Any, Optional[List[str]], Optional[str]]] = {}


def _signature_of(fn: Any) -> Tuple[Optional[List[str]], Optional[str]]:
    entry = _SIGNATURES.get(id(fn))
    if entry is not None and entry[0] is fn:
        return entry[1], entry[2]
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        names, var_kw = None, None
    else:
        if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
            names = None  # rare: fall back to inspect's binding
        else:
            names = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                          inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        var_kw = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    _SIGNATURES[id(fn)] = (fn, names, var_kw)
    return names, var_kw


def bind_arguments(fn: Any, args: tuple, kwargs: dict) -> Dict[str, Any]:
    """The call's arguments by parameter name; **kwargs entries are merged in. The
    signature is read once per function (the guard binds every call)."""
    names, _ = _signature_of(fn)
    if names is not None and len(args) <= len(names):
        out = dict(zip(names, args))
        for k, v in kwargs.items():
            out.setdefault(k, v)
        return out
    try:
        sig = inspect.signature(fn)
        bound = sig.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return dict(kwargs)
    out: Dict[str, Any] = {}
    for name, value in bound.arguments.items():
        param = sig.parameters[name]
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            for k, v in value.items():
                out.setdefault(k, v)
        elif param.kind is not inspect.Parameter.VAR_POSITIONAL:
            out[name] = value
    return out


def library_versions(known: Dict[str, str], missed: set) -> Dict[str, str]:
    """Versions of the libraries the run uses: the imported module's __version__ first
    (what actually runs), else the installed distribution's metadata (looked up once per
    name). `known` and `missed` persist between calls: a library imported lazily inside
    the first attention call (transformers 5.x imports flash_attn there) is found later."""
    for key, module_name, dists, imported_only in _VERSION_SOURCES:
        if key in known:
            continue
        mod = sys.modules.get(module_name)
        if imported_only and mod is None:
            continue  # asked again at the next call: the run may load it later
        version = getattr(mod, "__version__", None) if mod is not None else None
        if not isinstance(version, str) and key not in missed:
            from importlib import metadata
            for dist in dists:
                try:
                    version = metadata.version(dist)
                    break
                except Exception:
                    continue
            else:
                missed.add(key)
        if isinstance(version, str) and version:
            known[key] = version
    return {key: known[key] for key, *_ in _VERSION_SOURCES if key in known}


def call_pass(q: Any) -> str:
    """The batch's "pass": "training" when q requires grad with grad mode on (a backward
    will follow), else "forward"."""
    if not getattr(q, "requires_grad", False):
        return "forward"
    torch = sys.modules.get("torch")
    return "training" if torch is None or torch.is_grad_enabled() else "forward"


class NeedsSync(Exception):
    """A value lives on a device and reading it would synchronise (HostCache with sync=False)."""


class HostCache:
    """Host copies of small index tensors, reused while the same unmodified tensor is passed
    again (every layer of a forward receives the same mask and position ids). Entries hold
    a reference to their tensor so that its id and memory cannot be reused while cached.
    With sync=False a device tensor that is not cached yet is not read (NeedsSync): copying
    it to the host would wait for the device."""

    def __init__(self, size: int = 8, sync: bool = True):
        self.size = size
        self.sync = sync
        self._entries: List[Tuple[Any, Any, List[Any]]] = []
        self._summaries: List[Tuple[Any, Any, Any, Any]] = []

    def _find(self, t: Any) -> Tuple[Any, Optional[List[Any]]]:
        key = (getattr(t, "_version", None), tuple(T.shape(t)), T.dtype_name(t))
        for tensor, k, flat in self._entries:
            if tensor is t and k == key:
                return key, flat
        return key, None

    def require(self, t: Any) -> None:
        """Raise NeedsSync when reading `t` would synchronise and is not allowed."""
        if not self.sync and T.device_name(t) != "cpu" and self._find(t)[1] is None:
            raise NeedsSync(T.device_name(t))

    def summary(self, t: Any, what: str, compute: Any, related: Any = None) -> Any:
        """compute(t), cached like a host copy (same unmodified tensor, and the same
        unmodified `related` tensor when the answer depends on one, same answer); for
        summaries computed on the tensor's device, which read a few numbers back."""
        key = (what, getattr(t, "_version", None), tuple(T.shape(t)), getattr(related, "_version", None))
        for tensor, other, k, value in self._summaries:
            if tensor is t and other is related and k == key:
                return value
        self.require(t)
        if related is not None and T.is_tensor(related):
            self.require(related)
        value = compute(t)
        self._summaries.append((t, related, key, value))
        if len(self._summaries) > self.size:
            self._summaries.pop(0)
        return value

    def get(self, t: Any) -> List[Any]:
        key, flat = self._find(t)
        if flat is not None:
            return flat
        self.require(t)
        flat = T.flatten(T.host_list(t))
        self._entries.append((t, key, flat))
        if len(self._entries) > self.size:
            self._entries.pop(0)
        return flat


def scalar(ctx: "Context", x: Any) -> Tuple[Optional[int], bool]:
    """(value, given_as_tensor) for an int-or-0-d-tensor argument such as max_seqlen; a
    tensor is read through the context's cache."""
    if T.is_tensor(x):
        return int(ctx.cache.get(x)[0]), True
    return T.scalar_arg(x)


class Context:
    """What a builder may read besides the call's arguments."""

    def __init__(self, encoder: Encoder, cache: HostCache, versions: Dict[str, str],
                 module: Any = None, name: str = "", description: str = ""):
        self.encoder, self.cache, self.versions = encoder, cache, versions
        self.module, self.name, self.description = module, name, description


# -- pieces shared by the builders -------------------------------------------------------

def _config_of(module: Any) -> Any:
    return getattr(module, "config", None) if module is not None else None


def architecture_of(config: Any) -> Optional[str]:
    model_type = getattr(config, "model_type", None)
    if not isinstance(model_type, str) or not model_type:
        return None
    # sub-configs of multimodal models (qwen2_vl_text) carry the family's quirks
    for suffix in ("_text", "_text_model"):
        if model_type.endswith(suffix):
            model_type = model_type[: -len(suffix)]
    return model_type


def _int_attr(obj: Any, *names: str) -> Optional[int]:
    for name in names:
        v = getattr(obj, name, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _model_dtype(name: str) -> str:
    return name if name in T.MODEL_DTYPES else "fp32"


def _environment(ctx: Context, q: Any) -> Dict[str, Any]:
    env: Dict[str, Any] = dict(ctx.versions)
    env["device"] = T.device_name(q)
    return env


def _override(tensors: Dict[str, Dict[str, Any]], name: str, key: str, value: Any) -> None:
    tensors.setdefault(name, {})[key] = value


def _index_tensor_overrides(tensors: Dict[str, Dict[str, Any]], name: str, t: Any,
                            q_device: str) -> None:
    """int32 on q's device is what a correct call passes; anything else is recorded."""
    if T.dtype_name(t) != "int32":
        _override(tensors, name, "dtype", T.dtype_name(t))
    if T.device_name(t) != q_device:
        _override(tensors, name, "device", T.device_name(t))


def _qkv_overrides(tensors: Dict[str, Dict[str, Any]], q: Any, k: Any, v: Any,
                   model_dtype: str, q_dtype: str) -> None:
    if q_dtype != model_dtype:
        _override(tensors, "q", "dtype", q_dtype)
    for name, t in (("k", k), ("v", v)):
        if t is None:
            continue
        if T.dtype_name(t) != q_dtype:
            _override(tensors, name, "dtype", T.dtype_name(t))
        if T.device_name(t) != T.device_name(q):
            _override(tensors, name, "device", T.device_name(t))
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t is not None and not T.last_dim_contiguous(t):
            _override(tensors, name, "contiguous", False)


def _document(ctx: Context, env: Dict[str, Any], model: Dict[str, Any], q: Any = None, **blocks: Any
              ) -> Dict[str, Any]:
    doc: Dict[str, Any] = {"format": FORMAT}
    if ctx.name:
        doc["name"] = ctx.name
    if ctx.description:
        doc["description"] = ctx.description
    doc["pass"] = call_pass(q)
    doc["environment"] = env
    doc["model"] = model
    for key in ("batch", "varlen", "tensors", "rotary"):
        value = blocks.get(key)
        if value:
            doc[key] = value
    return doc


def _mask_block(ctx: Context, mask: Any) -> Dict[str, Any]:
    """The attention mask's object."""
    shape = T.shape(mask)
    floating = T.is_floating(mask)
    if len(shape) == 4:
        ctx.cache.require(mask)
        recovered = analyse_mask_4d(mask)
        flat = None if recovered is not None else ctx.cache.get(mask)
        return ctx.encoder.mask_4d(shape, floating, recovered=recovered, flat=flat)
    if len(shape) == 2 and not floating:
        summary = ctx.cache.summary(mask, "mask-2d", summarise_mask_2d)
        if summary is not None:
            return summary
    return ctx.encoder.mask(ctx.cache.get(mask), shape, T.dtype_name(mask), floating=floating)


def _mask_values_2d(ctx: Context, mask: Any) -> Optional[Tuple[List[int], List[int]]]:
    """(flat values, shape) of a 2-D integer mask (what the position-ids encoder compares
    against), else None."""
    if not T.is_tensor(mask) or T.ndim(mask) != 2 or T.is_floating(mask):
        return None
    return [int(v) for v in ctx.cache.get(mask)], T.shape(mask)


def _position_block(ctx: Context, pos: Any, mask: Any, origin: int, batch_size: int) -> Dict[str, Any]:
    """The position ids' object: computed on the device where torch has them (a few numbers
    read back), else from a host copy."""
    summary = ctx.cache.summary(pos, f"position-ids:{origin}:{batch_size}",
                                lambda p: summarise_position_ids(p, mask, origin, batch_size), related=mask)
    if summary is not None:
        return summary
    return ctx.encoder.position_ids(ctx.cache.get(pos), T.shape(pos), T.dtype_name(pos),
                                    _mask_values_2d(ctx, mask), origin, batch_size)


# -- the same encodings computed on the tensors' device (torch) ------------------------------
#
# A mask or position ids on the GPU is summarised there: a handful of reductions, then one
# copy of B + a few numbers to the host, instead of copying all B x S values and looping over
# them in Python. Each returns exactly what batchfile.Encoder writes for the same values, or
# None where only the values themselves describe the tensor (the caller then copies them).

def _torch_tensor(t: Any) -> Any:
    torch = sys.modules.get("torch")
    return torch if torch is not None and isinstance(t, torch.Tensor) else None


def summarise_mask_2d(mask: Any) -> Optional[Dict[str, Any]]:
    """{"lengths", "width", "padding_side"} for a (B, W) 0/1 mask whose rows are each one
    block of ones on a common side (full and empty rows fit both; right is preferred)."""
    torch = _torch_tensor(mask)
    if torch is None or mask.dim() != 2 or mask.shape[0] == 0 or mask.is_floating_point():
        return None
    rows, width = mask.shape
    attended = mask != 0
    lengths = attended.sum(-1)
    cols = torch.arange(width, device=mask.device)
    right = (attended == (cols < lengths[:, None])).all()
    left = (attended == (cols >= (width - lengths)[:, None])).all()
    binary = ((mask == 0) | (mask == 1)).all()
    head = torch.stack([binary, right, left]).to(lengths.dtype)
    values = torch.cat([head, lengths]).tolist()       # the one copy to the host
    is_binary, right_ok, left_ok, lengths_list = values[0], values[1], values[2], values[3:]
    if not is_binary or not (right_ok or left_ok):
        return None
    return {"lengths": [int(n) for n in lengths_list], "width": int(width),
            "padding_side": "right" if right_ok else "left"}


def summarise_position_ids(pos: Any, mask: Any, origin: int, batch_size: Optional[int]) -> Optional[Dict[str, Any]]:
    """{"from": "arange"} / {"from": "mask"} / {"from": "packed", "lengths"} (each with
    "mrope" for three identical planes) for position ids that are exactly that, else None."""
    torch = _torch_tensor(pos)
    if torch is None:
        return None
    mrope = False
    p = pos
    if p.dim() == 3 and p.shape[0] == 3:
        if not bool(((p[0] == p[1]) & (p[0] == p[2])).all()):
            return None
        p, mrope = p[0], True
    if p.dim() != 2 or p.shape[1] == 0:
        return None
    rows, width = p.shape
    cols = torch.arange(width, device=p.device)
    checks = [(p == cols).all() if (batch_size is None or rows == batch_size) else torch.zeros((), dtype=torch.bool, device=p.device)]
    m = mask if (_torch_tensor(mask) is not None and mask.dim() == 2 and tuple(mask.shape) == (rows, width)
                 and not mask.is_floating_point()) else None
    if m is not None:
        binary = ((m == 0) | (m == 1)).all()
        # generate's convention: cumsum(mask) - 1, padded slots set to 1
        expected = torch.where(m != 0, m.to(torch.int64).cumsum(-1) - 1, torch.ones_like(p, dtype=torch.int64))
        checks.append(binary & (p.to(torch.int64) == expected).all())
    else:
        checks.append(torch.zeros((), dtype=torch.bool, device=p.device))
    starts = p[0] == origin
    if rows == 1:
        continues = p[0, 1:] == p[0, :-1] + 1
        checks.append(starts[0] & (continues | starts[1:]).all())
    else:
        checks.append(torch.zeros((), dtype=torch.bool, device=p.device))
    arange_ok, mask_ok, packed_ok = torch.stack(checks).tolist()   # one copy to the host
    obj: Optional[Dict[str, Any]] = None
    if arange_ok:
        obj = {"from": "arange"}
    elif mask_ok:
        obj = {"from": "mask"}
    elif packed_ok:
        at = torch.cat([starts.nonzero().flatten(), torch.tensor([width], device=p.device)])
        lengths = (at[1:] - at[:-1]).tolist()
        if len(lengths) > 1:
            obj = {"from": "packed", "lengths": [int(n) for n in lengths]}
    if obj is not None and mrope:
        obj["mrope"] = True
    return obj


def analyse_mask_4d(mask: Any) -> Optional[Tuple[List[int], bool]]:
    """(2-D mask, causal) a (B, 1, Q, K) mask was built from, or None. With torch the test
    runs on the mask's device and only the (B, K) result is copied to the host."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(mask, torch.Tensor):
        from .batchfile import recover_2d_from_4d
        flat = T.flatten(T.host_list(mask))
        attended = [(v == 0) if T.is_floating(mask) else (v != 0) for v in flat]
        return recover_2d_from_4d(attended, T.shape(mask))
    b, h, q, k = mask.shape
    if h != 1 or q == 0:
        return None
    attended = (mask == 0) if mask.is_floating_point() else (mask != 0)
    from_2d = attended.any(dim=2, keepdim=True)                      # (B, 1, 1, K)
    rows = torch.arange(q, device=mask.device).view(1, 1, q, 1)
    cols = torch.arange(k, device=mask.device).view(1, 1, 1, k)
    for causal in (True, False):
        built = from_2d.expand(b, 1, q, k)
        if causal:
            built = built & (cols <= rows + (k - q))
        if torch.equal(built, attended):
            return [int(v) for v in from_2d.reshape(-1).tolist()], causal
    return None


# -- transformers ------------------------------------------------------------------------

def _transformers_model(ctx: Context, a: Dict[str, Any]) -> Tuple[Dict[str, Any], str, int]:
    """(model block, the dtype the kernel gets, position origin) of a transformers call."""
    q, k = a["query_states"], a["key_states"]
    module = a.get("self", ctx.module)
    config = _config_of(module)
    q_shape, k_shape = T.shape(q), T.shape(k)

    q_dtype = T.dtype_name(q)
    target = a.get("target_dtype")
    # transformers casts fp32 q/k/v (PEFT-upcast layer norms) back to target_dtype first
    kernel_dtype = T.dtype_name(target) if (target is not None and q_dtype == "fp32") else q_dtype

    model: Dict[str, Any] = {"num_heads": q_shape[2], "num_kv_heads": k_shape[2],
                             "head_dim": q_shape[3]}
    hidden = _int_attr(config, "hidden_size")
    if hidden is not None:
        model["hidden_size"] = hidden
    model["dtype"] = _model_dtype(kernel_dtype)
    causal = a.get("is_causal")
    if causal is None:
        causal = getattr(module, "is_causal", True)
    model["causal"] = bool(causal)

    window = a.get("sliding_window")
    if window is None and a.get("use_sliding_windows"):
        # <= 4.41 Mistral-style layers pass a flag and read the window from the config
        window = _int_attr(config, "sliding_window")
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        model["sliding_window"] = window
    softcap = a.get("softcap")
    if isinstance(softcap, (int, float)) and not isinstance(softcap, bool) and softcap:
        model["softcap"] = float(softcap)
    dropout = a.get("dropout")
    if isinstance(dropout, (int, float)) and dropout:
        model["dropout"] = float(dropout)
    arch = architecture_of(config)
    if arch:
        model["architecture"] = arch
    origin = 0
    if arch in _ROBERTA_LIKE:
        pad = _int_attr(config, "pad_token_id")
        if pad is not None:
            origin = pad + 1
            model["position_origin"] = origin
    return model, kernel_dtype, origin


def transformers_call(ctx: Context, a: Dict[str, Any]) -> Dict[str, Any]:
    """Batch document for `_flash_attention_forward` (module function or model method)."""
    q, k, v = a["query_states"], a["key_states"], a["value_states"]
    q_shape, k_shape = T.shape(q), T.shape(k)
    q_device = T.device_name(q)
    model, kernel_dtype, origin = _transformers_model(ctx, a)

    batch: Dict[str, Any] = {}
    tensors: Dict[str, Dict[str, Any]] = {}
    mask = a.get("attention_mask")
    model_mask = model_level_mask(ctx)
    if model_mask is not None:
        # the model received segment ids: the document gives the model's mask, and the replay
        # runs the release's mask preparation (which may cast it to bool) before the conversion
        batch["attention_mask"] = model_mask
    elif T.is_tensor(mask):
        batch["attention_mask"] = _mask_block(ctx, mask)
    pos = a.get("position_ids")
    if T.is_tensor(pos):
        batch["position_ids"] = _position_block(ctx, pos, None if model_mask is not None else mask, origin,
                                                q_shape[0])
        if T.device_name(pos) != q_device:
            _override(tensors, "position_ids", "device", T.device_name(pos))
    query_length = a.get("query_length")
    batch["query_length"] = int(query_length) if query_length is not None else q_shape[1]
    batch["kv_length"] = k_shape[1]
    # B is written when neither the mask nor the position ids' rows give it
    pos_obj = batch.get("position_ids")
    if "attention_mask" not in batch and (pos_obj is None or pos_obj.get("from") == "arange"):
        batch["batch_size"] = q_shape[0]

    kwargs = {}
    for hf_name, tensor_name in (("cu_seq_lens_q", "cu_seqlens_q"), ("cu_seq_lens_k", "cu_seqlens_k")):
        cu = a.get(hf_name)
        if T.is_tensor(cu):
            kwargs[hf_name] = [int(x) for x in ctx.cache.get(cu)]
            _index_tensor_overrides(tensors, tensor_name, cu, q_device)
    for hf_name in ("max_length_q", "max_length_k"):
        value, _ = scalar(ctx, a.get(hf_name))
        if value is not None:
            kwargs[hf_name] = value
    if kwargs:
        batch["flash_kwargs"] = kwargs

    _qkv_overrides(tensors, q, k, v, model["dtype"], kernel_dtype)
    return _document(ctx, _environment(ctx, q), model, q=q, batch=batch, tensors=tensors)


def model_level_mask(ctx: Context) -> Optional[Dict[str, Any]]:
    """The mask object (`"level": "model"`) of the mask the running model's forward received,
    when it is a 2-D integer mask holding values other than 0 and 1 (segment ids, which the
    model's mask preparation casts to bool or drops before the attention sees them); else None:
    the attention-level mask then describes the call exactly."""
    frame = hooks.model_inputs()
    user = frame.attention_mask if frame is not None else None
    if not T.is_tensor(user) or T.ndim(user) != 2 or T.is_floating(user) or T.dtype_name(user) == "bool":
        return None
    values = [int(v) for v in ctx.cache.get(user)]
    if all(v in (0, 1) for v in values):
        return None
    obj = ctx.encoder.mask(values, T.shape(user), T.dtype_name(user))
    obj["level"] = "model"
    return obj


# -- flash_attn --------------------------------------------------------------------------

def _window_and_softcap(model: Dict[str, Any], a: Dict[str, Any]) -> None:
    window = a.get("window_size")
    if isinstance(window, (tuple, list)) and len(window) == 2 and int(window[0]) >= 0:
        # FA's window_size=(left, right) is inclusive; left = W - 1 covers W keys
        model["sliding_window"] = int(window[0]) + 1
    softcap = a.get("softcap")
    if isinstance(softcap, (int, float)) and not isinstance(softcap, bool) and softcap > 0:
        model["softcap"] = float(softcap)
    dropout = a.get("dropout_p")
    if isinstance(dropout, (int, float)) and dropout:
        model["dropout"] = float(dropout)


def _kernel_model(q: Any, k: Any, a: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    qs, ks = T.shape(q), T.shape(k)
    model: Dict[str, Any] = {"num_heads": qs[-2], "num_kv_heads": ks[-2], "head_dim": qs[-1]}
    config = _config_of(ctx.module)
    hidden = _int_attr(config, "hidden_size")
    if hidden is not None:
        model["hidden_size"] = hidden
    model["dtype"] = _model_dtype(T.dtype_name(q))
    model["causal"] = bool(a.get("causal", False))
    _window_and_softcap(model, a)
    arch = architecture_of(config)
    if arch:
        model["architecture"] = arch
    return model


def varlen_arguments(ctx: Context, a: Dict[str, Any]) -> Dict[str, Any]:
    """The `varlen` block (and which tensors differ from a correct call) for the arguments
    of `flash_attn_varlen_func`; also used for the summary of an observed inner call."""
    q, k = a["q"], a["k"]
    block: Dict[str, Any] = {}
    cu_q, cu_k = a.get("cu_seqlens_q"), a.get("cu_seqlens_k")
    if T.is_tensor(cu_q):
        ctx.encoder.cu_seqlens_q(block, [int(x) for x in ctx.cache.get(cu_q)], T.dtype_name(cu_q))
    if T.is_tensor(cu_k):
        block["cu_seqlens_k"] = [int(x) for x in ctx.cache.get(cu_k)]
    for name in ("max_seqlen_q", "max_seqlen_k"):
        value, is_tensor = scalar(ctx, a.get(name))
        if value is not None:
            block[name] = {"tensor": value} if is_tensor else value
    used = a.get("seqused_k")
    if T.is_tensor(used):
        block["seqused_k"] = [int(x) for x in ctx.cache.get(used)]
    block["total_q"] = T.shape(q)[0]
    block["total_k"] = T.shape(k)[0]
    return block


def flash_attn_varlen_call(ctx: Context, a: Dict[str, Any]) -> Dict[str, Any]:
    q, k, v = a["q"], a["k"], a.get("v")
    model = _kernel_model(q, k, a, ctx)
    tensors: Dict[str, Dict[str, Any]] = {}
    for name in ("cu_seqlens_q", "cu_seqlens_k"):
        t = a.get(name)
        if T.is_tensor(t):
            _index_tensor_overrides(tensors, name, t, T.device_name(q))
    _qkv_overrides(tensors, q, k, v, model["dtype"], T.dtype_name(q))
    return _document(ctx, _environment(ctx, q), model, q=q,
                     varlen=varlen_arguments(ctx, a), tensors=tensors)


def flash_attn_dense_call(ctx: Context, a: Dict[str, Any]) -> Dict[str, Any]:
    q, k, v = a["q"], a["k"], a.get("v")
    model = _kernel_model(q, k, a, ctx)
    qs, ks = T.shape(q), T.shape(k)
    tensors: Dict[str, Dict[str, Any]] = {}
    _qkv_overrides(tensors, q, k, v, model["dtype"], T.dtype_name(q))
    batch = {"batch_size": qs[0], "query_length": qs[1], "kv_length": ks[1]}
    return _document(ctx, _environment(ctx, q), model, q=q, batch=batch, tensors=tensors)


def observed_kernel_call(ctx: Context, entry: str, a: Dict[str, Any]) -> Dict[str, Any]:
    """Summary of a kernel call made inside a recorded transformers call: what transformers
    actually passed. Kept in the capture manifest (the batch file stays the framework's view)."""
    q = a.get("q")
    out: Dict[str, Any] = {"entry": entry}
    if entry.endswith("varlen_func"):
        block = varlen_arguments(ctx, a)
        out.update(block)
        for name in ("cu_seqlens_q", "cu_seqlens_k"):
            t = a.get(name)
            if T.is_tensor(t):
                out[name + "_dtype"] = T.dtype_name(t)
    elif q is not None:
        out["q_shape"] = T.shape(q)
        if a.get("k") is not None:
            out["k_shape"] = T.shape(a["k"])
    for name in ("causal", "window_size", "softcap"):
        value = a.get(name)
        if isinstance(value, (bool, int, float)):
            out[name] = value
        elif isinstance(value, (tuple, list)):
            out[name] = [int(x) for x in value]
    return out


# -- fla ---------------------------------------------------------------------------------

def fla_rotary_call(ctx: Context, a: Dict[str, Any]) -> Dict[str, Any]:
    rotary_module = a["self"]
    q, k = a["q"], a.get("k")
    qs = T.shape(q)
    model: Dict[str, Any] = {"num_heads": qs[-2], "head_dim": qs[-1]}
    if k is not None:
        model["num_kv_heads"] = T.shape(k)[-2]
    config = _config_of(ctx.module)
    hidden = _int_attr(config, "hidden_size")
    if hidden is not None:
        model["hidden_size"] = hidden
    model["dtype"] = _model_dtype(T.dtype_name(q))

    rotary: Dict[str, Any] = {"implementation": "fla"}
    dim = _int_attr(rotary_module, "dim", "rotary_dim")
    if dim is not None:
        rotary["dim"] = dim
    base = getattr(rotary_module, "base", None)
    if isinstance(base, (int, float)) and not isinstance(base, bool):
        rotary["base"] = float(base)
    rotary["interleaved"] = bool(getattr(rotary_module, "interleaved", False))
    offset = a.get("seqlen_offset", a.get("seqlen_offsets", 0))
    if T.is_tensor(offset):
        values = [int(x) for x in ctx.cache.get(offset)]
        rotary["seqlen_offset"] = values[0] if T.ndim(offset) == 0 else values
    elif isinstance(offset, int) and offset:
        rotary["seqlen_offset"] = int(offset)
    cu = a.get("cu_seqlens")
    rotary["varlen"] = T.is_tensor(cu)
    rotary["layout"] = "BTHD"

    varlen: Dict[str, Any] = {}
    tensors: Dict[str, Dict[str, Any]] = {}
    batch: Dict[str, Any] = {}
    if T.is_tensor(cu):
        ctx.encoder.cu_seqlens_q(varlen, [int(x) for x in ctx.cache.get(cu)], T.dtype_name(cu))
        # packed input: (1, total, H, D)
        varlen["total_q"] = qs[0] * qs[1]
        _index_tensor_overrides(tensors, "cu_seqlens_q", cu, T.device_name(q))
    else:
        # [B, T, H, D]: FLA asserts its table against this T (rotary.table), so the file says it
        batch = {"batch_size": qs[0], "query_length": qs[1],
                 "kv_length": T.shape(k)[1] if k is not None else qs[1]}
    return _document(ctx, _environment(ctx, q), model, q=q, batch=batch, varlen=varlen, tensors=tensors,
                     rotary=rotary)



# -- torch -------------------------------------------------------------------------------

# torch.nn.attention.varlen.varlen_attn's parameters -> flash_attn_varlen_func's names
_TORCH_VARLEN_NAMES = (("query", "q"), ("key", "k"), ("value", "v"), ("cu_seq_q", "cu_seqlens_q"),
                       ("cu_seq_k", "cu_seqlens_k"), ("max_q", "max_seqlen_q"), ("max_k", "max_seqlen_k"))


def gpu_arch(q: Any) -> Optional[str]:
    """The architecture of q's CUDA device as CUDA names it ("sm_90"), from
    torch.cuda.get_device_capability; None off CUDA or when torch cannot say."""
    device = T.device_name(q)
    if not device.startswith("cuda"):
        return None
    torch = sys.modules.get("torch")
    try:
        major, minor = torch.cuda.get_device_capability(getattr(q, "device", device))
    except Exception:
        return None
    if not (isinstance(major, int) and isinstance(minor, int)) or major < 1:
        return None
    return f"sm_{major}{minor}"


def torch_varlen_arguments(a: Dict[str, Any]) -> Dict[str, Any]:
    """varlen_attn's bound arguments under flash_attn_varlen_func's names; causal as the
    release computes it: `is_causal` (2.10), else `window_size == (-1, 0)` (2.11 -, a tuple
    comparison: a list [-1, 0] is not causal there)."""
    out = dict(a)
    for theirs, ours in _TORCH_VARLEN_NAMES:
        if theirs in a:
            out[ours] = a[theirs]
    window = a.get("window_size")
    if "is_causal" in a:
        out["causal"] = bool(a.get("is_causal"))
    else:
        out["causal"] = isinstance(window, tuple) and tuple(window) == (-1, 0)
    out.pop("window_size", None)  # written as passed in the varlen block, not as a model window
    return out


def torch_varlen_call(ctx: Context, a: Dict[str, Any]) -> Dict[str, Any]:
    """`torch.nn.attention.varlen.varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q,
    max_k, *, ...)`: the `varlen` block as passed, with `api` "torch.varlen_attn", the window
    as passed, `seqused_k` / `num_splits` / `enable_gqa` where given, and the GPU architecture."""
    b = torch_varlen_arguments(a)
    doc = flash_attn_varlen_call(ctx, b)
    varlen = doc["varlen"]
    varlen["api"] = "torch.varlen_attn"
    window = a.get("window_size")
    if isinstance(window, (tuple, list)) and len(window) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) for x in window):
        if tuple(window) != (-1, -1):
            varlen["window_size"] = [int(window[0]), int(window[1])]
    splits = a.get("num_splits")
    if isinstance(splits, int) and not isinstance(splits, bool):
        varlen["num_splits"] = splits
    if isinstance(a.get("enable_gqa"), bool):  # torch 2.12.0 on
        varlen["enable_gqa"] = a["enable_gqa"]
    arch = gpu_arch(b["q"])
    if arch:
        doc["environment"]["gpu_arch"] = arch
    return doc



def metadata_model(ctx: Context, kind: str, q: Any, k: Any, a: Dict[str, Any]) -> Dict[str, Any]:
    """The model block of any hooked call, from the call's metadata alone (no index values)."""
    if kind in ("transformers", "transformers_method"):
        return _transformers_model(ctx, a)[0]
    if kind == "torch_varlen":
        a = torch_varlen_arguments(a)
    return _kernel_model(q, k if k is not None else q, a, ctx)


qkv_overrides = _qkv_overrides
document = _document
environment = _environment


def fla_rotary_table_length(rotary_module: Any) -> Optional[int]:
    """Rows of FLA's cached cos/sin table (read after the call: the call grows it)."""
    return _int_attr(rotary_module, "_seq_len_cached")


BUILDERS = {
    "transformers": transformers_call,
    "flash_attn_varlen": flash_attn_varlen_call,
    "flash_attn_dense": flash_attn_dense_call,
    "fla_rotary": fla_rotary_call,
    "torch_varlen": torch_varlen_call,
    "te_dpa": te_thd.te_dpa_call,
}

__all__ = ["BUILDERS", "Context", "call_pass", "HostCache", "NeedsSync", "bind_arguments", "document",
           "environment", "library_versions", "metadata_model", "qkv_overrides", "scalar",
           "observed_kernel_call", "analyse_mask_4d"]
