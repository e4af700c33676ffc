"""Run one oracle case (a batch file) on the real stack, in this process, and write its record.

    python tools/oracle/case.py BATCH.json --out RECORD.json [--mode run|sanitize] [--dry-cpu]

`run`: build the real call the batch describes, run the forward, then the backward of
loss = (out * dO).sum() with a seeded dO, and compare the output and the gradients with the fp32
reference over the intended sequences (reference.py). `sanitize`: the same calls without the
reference, for compute-sanitizer (tools/oracle/runner.py runs it in a separate process and
splits its report at the "ORACLE-MARK backward" line this mode prints between the passes).

What runs (tools/oracle/README.md has the whole story):
- `varlen` batches: q/k/v with the rows the batch describes, cu_seqlens of the dtype, device and
  shape it gives, max_seqlen as an int or a 0-d tensor, straight into PyTorch's bundled FA2
  (aten::_flash_attention_forward; the backward is its autograd formula); with `varlen.api`
  "torch.varlen_attn", into torch.nn.attention.varlen.varlen_attn of the installed torch; with
  environment.flash_attn_4, into flash_attn.cute.flash_attn_varlen_func of the flash-attn-4 on
  the path (tools/oracle/fa4_device.sh installs each release; the record notes a release or GPU
  architecture other than the batch's);
- `batch` batches: the named transformers release's real `_flash_attention_forward` (<= 4.42:
  LlamaFlashAttention2's copy) on CUDA tensors, through tools/parity/tracing.Target, with the
  oracle's stand-in flash_attn;
- `rotary` batches: FLA's RotaryEmbedding or flash-attn's Triton rotary of the carried release
  on q and k, then the attention as above.
The record is JSON (schema in tools/oracle/README.md); the runner adds the sanitizer results and
the call's outcome.
"""

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(HERE), str(REPO / "tools" / "parity")]

import outcome  # noqa: E402
import reference  # noqa: E402
import stack  # noqa: E402

DEFAULT_FLASH_ATTN = "2.6.3"
DEFAULT_FLA = "0.6.0"
BIG_SCORES = 1 << 34          # score elements of one sequence above which the reference samples rows
SAMPLED_ROWS = 384


class NotMeasured(Exception):
    """The case cannot be run on the oracle's stack as described (the reason is the message)."""


def version_tuple(text):
    parts = []
    for piece in str(text).split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def kind_of(doc):
    """Which stack a batch file describes; raises NotMeasured for the ones the oracle cannot run."""
    env = doc.get("environment", {})
    if "launch" in doc and not any(k in doc for k in ("batch", "varlen", "rotary")):
        raise NotMeasured(f"Triton autotuner launch (triton {env.get('triton', 'unnamed')}): the device has triton 3.6, "
                          "whose autotuner looks keys up by name; the positional lookup of triton <= 3.1 cannot run there")
    if env.get("flash_attn_4"):
        found = fa4_release()
        if found is None:
            raise NotMeasured("flash-attn-4 is not importable here (flash_attn.cute): carry its wheels and the CuTe "
                              "DSL as tools/oracle/fa4_device.sh does")
        if "varlen" not in doc:
            raise NotMeasured("flash-attn-4 is measured through explicit varlen calls only")
        return "explicit"
    if env.get("flash_attn") and version_tuple(env["flash_attn"])[0] >= 3:
        raise NotMeasured(f"flash-attn {env['flash_attn']} is FA3 (Hopper): the device has PyTorch's bundled FA2 only")
    if doc["model"].get("architecture") == "gemma2":
        raise NotMeasured("Gemma-2 model-level batch: the release's Gemma2 attention layer (mask slicing, softcap) is "
                          "part of the call, and PyTorch's bundled FA2 has no logit softcap")
    if "rotary" in doc:
        return "rotary"
    if "varlen" in doc:
        return "explicit"
    if "batch" in doc:
        return "transformers"
    raise NotMeasured("nothing to run")


def fa4_release():
    """The installed flash-attn-4 release (its dist-info next to flash_attn/cute), None if absent."""
    import importlib.metadata
    import importlib.util
    try:
        if importlib.util.find_spec("flash_attn.cute") is None:
            return None
        return importlib.metadata.version("flash-attn-4")
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
        return None


def gpu_arch():
    """sm_XY(a) of cuda:0 ("a" on 9.0 and 10.x, the architecture-specific targets FA4 compiles for)."""
    import torch
    if not torch.cuda.is_available():
        return "cpu"
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}" + ("a" if major in (9, 10) else "")


# ---------------------------------------------------------------------------------------
# inputs

def _dtype(name, default):
    import torch
    table = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
             "half": torch.float16, "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
             "fp64": torch.float64, "int32": torch.int32, "int": torch.int32, "int64": torch.int64,
             "long": torch.int64, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
             "fp8_e4m3": torch.float8_e4m3fn, "float8_e4m3fn": torch.float8_e4m3fn}
    if name is None:
        return default
    return table[name.replace("torch.", "")]


class Ctx:
    """One case's inputs and settings."""

    def __init__(self, path, doc, dry, notes):
        import torch
        self.path, self.doc, self.dry, self.notes = path, doc, dry, notes
        self.model = doc["model"]
        self.env = doc.get("environment", {})
        self.tensors = doc.get("tensors", {})
        self.heads = self.model["num_heads"]
        self.kv_heads = self.model.get("num_kv_heads", self.heads)
        self.dim = self.model["head_dim"]
        self.dtype = _dtype(self.tensors.get("q", {}).get("dtype") or self.model.get("dtype"), torch.bfloat16)
        self.causal = self.model.get("causal", True)
        w = self.model.get("sliding_window")
        # a window of W tokens, the query included: FA2's inclusive (W - 1, 0) (lib/convert/explicit.cpp)
        self.window = (w - 1, 0 if self.causal else w - 1) if w else (-1, -1)
        passed = doc.get("varlen", {}).get("window_size")
        if passed is not None:  # the window as the call passed it (varlen.window_size)
            self.window = (int(passed[0]), int(passed[1]))
        self.api = doc.get("varlen", {}).get("api")
        self.softcap = self.model.get("softcap") or 0.0
        self.device = "cpu" if dry else "cuda"

    def device_for(self, name):
        """The device a tensor lives on: tensors.<name>.device, else the call's (cuda:N -> the one GPU)."""
        if self.dry:
            return "cpu"
        wanted = self.tensors.get(name, {}).get("device") or self.env.get("device", "cuda:0")
        if wanted.startswith("cuda"):
            if wanted not in ("cuda", "cuda:0"):
                self.notes.append(f"{name} on {wanted} in the batch: the device has one GPU, cuda:0 ran it")
            return "cuda:0"
        return wanted

    def randn(self, shape, seed, dtype=None):
        import torch
        g = torch.Generator(device=self.device).manual_seed(seed)
        return torch.randn(*shape, generator=g, device=self.device, dtype=torch.float32 if dtype is None else dtype)


def _torch_version():
    import torch
    return torch.__version__


def leaf(x, dtype, device):
    return x.to(device=device, dtype=dtype).detach().requires_grad_(True)


# ---------------------------------------------------------------------------------------
# the stacks

class Explicit:
    """`varlen` batches: the arguments as passed, straight into PyTorch's FA2."""

    def __init__(self, ctx):
        import numpy as np
        import torch
        self.ctx = ctx
        v = ctx.doc["varlen"]
        if "cu_seqlens_file" in v:
            arr = np.load(ctx.path.parent / v["cu_seqlens_file"])
            cu_q_values, file_dtype = arr.astype("int64").tolist(), str(arr.dtype)
        else:
            cu_q_values, file_dtype = v["cu_seqlens_q"], None
        cu_k_values = v.get("cu_seqlens_k", cu_q_values)
        self.cu_q_values = cu_q_values
        self.cu_k_values = cu_k_values
        self.same_k = "cu_seqlens_k" not in v or v["cu_seqlens_k"] == cu_q_values
        flat_q = [x for x in _flatten(cu_q_values)]
        flat_k = [x for x in _flatten(cu_k_values)]
        one_d = not any(isinstance(x, list) for x in cu_q_values)
        default_max = max([b - a for a, b in zip(flat_q, flat_q[1:])] or [0]) if one_d else 0
        t = ctx.tensors
        self.total_q = t.get("q", {}).get("rows", v.get("total_q", max(0, flat_q[-1]) if flat_q else 0))
        default_k = max(0, flat_k[-1]) if ("cu_seqlens_k" in v and flat_k) else self.total_q
        self.total_k = t.get("k", {}).get("rows", v.get("total_k", default_k))
        rows_v = t.get("v", {}).get("rows", self.total_k)
        cu_dtype_q = _dtype(t.get("cu_seqlens_q", {}).get("dtype") or file_dtype, torch.int32)
        cu_dtype_k = _dtype(t.get("cu_seqlens_k", {}).get("dtype") or (None if "cu_seqlens_k" in v else
                                                                         t.get("cu_seqlens_q", {}).get("dtype") or file_dtype),
                            torch.int32)
        q_device = ctx.device_for("q")
        self.cu_q = torch.tensor(cu_q_values, dtype=cu_dtype_q,
                                 device=ctx.device_for("cu_seqlens_q") if "cu_seqlens_q" in t else q_device)
        self.cu_k = torch.tensor(cu_k_values, dtype=cu_dtype_k,
                                 device=ctx.device_for("cu_seqlens_k") if "cu_seqlens_k" in t else
                                 (ctx.device_for("cu_seqlens_q") if "cu_seqlens_q" in t else q_device))
        self.max_q = self._max(v.get("max_seqlen_q", default_max), q_device)
        self.max_k = self._max(v.get("max_seqlen_k", v.get("max_seqlen_q", default_max)), q_device)
        self.seqused_k = (torch.tensor(v["seqused_k"], dtype=torch.int32, device=q_device)
                          if "seqused_k" in v else None)
        self.seqused_q = (torch.tensor(v["seqused_q"], dtype=torch.int32, device=q_device)
                          if "seqused_q" in v else None)
        dt = ctx.dtype
        k_dtype = _dtype(t.get("k", {}).get("dtype"), dt)
        v_dtype = _dtype(t.get("v", {}).get("dtype"), dt)
        self.q = leaf(ctx.randn((self.total_q, ctx.heads, ctx.dim), 1, dtype=_gen_dtype(dt)), dt, q_device)
        self.k = leaf(ctx.randn((self.total_k, ctx.kv_heads, ctx.dim), 2, dtype=_gen_dtype(k_dtype)), k_dtype,
                      ctx.device_for("k"))
        self.v = leaf(ctx.randn((rows_v, ctx.kv_heads, ctx.dim), 3, dtype=_gen_dtype(v_dtype)), v_dtype,
                      ctx.device_for("v"))
        self.rotary = None
        self.k_segments = None
        self.stack = {"attention": "PyTorch's bundled FA2 (aten::_flash_attention_forward / _flash_attention_backward)",
                      "conversion": "none (the batch's explicit varlen arguments)"}
        if one_d and "intent" not in ctx.doc:
            self.intent, self.intent_source = reference.intent_from_cu(flat_q, self.total_q), "cu_seqlens_q"
            self.k_segments = reference.segments_from_cu(flat_q, self.total_q)
        elif "intent" in ctx.doc:
            self.intent, self.intent_source = reference.derive_intent(ctx.doc, {})[0], "given"
        else:
            self.intent, self.intent_source = [], "none"

    def _max(self, value, device):
        import torch
        if isinstance(value, dict):
            return torch.tensor(value["tensor"], dtype=torch.int64, device=device)
        return value

    def leaves(self):
        return self.q, self.k, self.v

    def attention(self, q, k, v):
        if self.ctx.api == "torch.varlen_attn":
            return self.torch_varlen_attn(q, k, v)
        if self.ctx.env.get("flash_attn_4"):
            return self.flash_attn_4_varlen(q, k, v)
        from flash_attn import flash_attn_interface as fi
        return fi.varlen_with_seqused_k(q, k, v, self.cu_q, self.cu_k, self.max_q, self.max_k, self.seqused_k,
                                        causal=self.ctx.causal, window_size=self.ctx.window, softcap=self.ctx.softcap)

    def torch_varlen_attn(self, q, k, v):
        """torch.nn.attention.varlen.varlen_attn of the installed torch, called as the batch
        describes: the window as `window_size` (a tuple: 2.11 derives is_causal from
        `window_size == (-1, 0)`), or, for a release whose signature has `is_causal` (2.10) and
        a batch without a window, `is_causal`; `seqused_k` / `num_splits` when the batch gives
        them. A keyword the installed release lacks is passed all the same: its TypeError is
        what that call does there."""
        import inspect
        from torch.nn.attention.varlen import varlen_attn
        params = inspect.signature(varlen_attn).parameters
        v_block = self.ctx.doc["varlen"]
        kwargs = {}
        window = self.ctx.window
        if self.ctx.causal and "window_size" not in v_block:
            window = (window[0], 0)
        if "is_causal" in params and "window_size" not in v_block and window[0] < 0:
            kwargs["is_causal"] = bool(self.ctx.causal)
        else:
            kwargs["window_size"] = tuple(window)
        for name, value in (("seqused_k", self.seqused_k), ("num_splits", v_block.get("num_splits"))):
            if value is not None:
                kwargs[name] = value
        self.stack["attention"] = (f"torch.nn.attention.varlen.varlen_attn (torch {_torch_version()}), "
                                   f"keywords {sorted(kwargs)}")
        return varlen_attn(q, k, v, self.cu_q, self.cu_k, self.max_q, self.max_k, **kwargs)

    def flash_attn_4_varlen(self, q, k, v):
        """flash_attn.cute.flash_attn_varlen_func of the installed flash-attn-4, bound as the batch
        says (varlen.binding): "positional" passes q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
        max_seqlen_k by position (the 4.0.0b5 order; a release with qv fourth binds them one
        parameter later, which is what that call does there), anything else by keyword. causal,
        window_size (FA4 spells an unlimited side None; -1 is passed as the batch gives it),
        pack_gqa, seqused_q / seqused_k and num_splits only when the batch gives them. The
        function returns (out, lse) in some releases and out in others: the output is the first."""
        from flash_attn.cute import flash_attn_varlen_func
        vb = self.ctx.doc["varlen"]
        kwargs = {"causal": bool(self.ctx.causal)}
        if "window_size" in vb:
            kwargs["window_size"] = tuple(int(x) for x in vb["window_size"])
        elif self.ctx.window != (-1, -1):
            kwargs["window_size"] = tuple(self.ctx.window)
        for name, value in (("pack_gqa", vb.get("pack_gqa")), ("seqused_q", self.seqused_q),
                            ("seqused_k", self.seqused_k), ("num_splits", vb.get("num_splits"))):
            if value is not None:
                kwargs[name] = value
        release = fa4_release()
        wanted = self.ctx.env["flash_attn_4"]
        if release != wanted:
            self.ctx.notes.append(f"flash-attn-4 {release} ran the call (the batch names {wanted})")
        arch, named = gpu_arch(), self.ctx.env.get("gpu_arch")
        if named and named != arch:
            self.ctx.notes.append(f"ran on {arch} (the batch names {named}): {arch}'s kernels, not {named}'s")
        binding = vb.get("binding", "keyword")
        self.stack["attention"] = (f"flash_attn.cute.flash_attn_varlen_func (flash-attn-4 {release}, {arch}), "
                                   f"{binding} binding, keywords {sorted(kwargs)}")
        if binding == "positional":
            result = flash_attn_varlen_func(q, k, v, self.cu_q, self.cu_k, self.max_q, self.max_k, **kwargs)
        else:
            result = flash_attn_varlen_func(q, k, v, cu_seqlens_q=self.cu_q, cu_seqlens_k=self.cu_k,
                                            max_seqlen_q=self.max_q, max_seqlen_k=self.max_k, **kwargs)
        return result[0] if isinstance(result, tuple) else result

    def forward(self):
        q, k = self.q, self.k
        if self.rotary is not None:
            q, k = self.rotary.apply(q, k, self)
        return self.attention(q, k, self.v)

    def sequences(self):
        seqused = self.ctx.doc["varlen"].get("seqused_k")
        return reference.packed_sequences(self.intent, list(_flatten(self.cu_k_values)), self.total_q, self.total_k,
                                          self.same_k, seqused, self.k_segments)


class Padded:
    """`batch` batches: the release's conversion on (B, L, H, D) tensors; or, for a rotary batch
    without a transformers conversion, flash-attn's own unpad (bert_padding) or dense call."""

    def __init__(self, ctx, conversion):
        import torch
        import batchfile
        self.ctx = ctx
        case = batchfile.load(ctx.path)
        self.case = case
        mask = case["attention_mask"]
        self.mask2d = mask if mask is not None and mask.dim() == 2 else None
        block = ctx.doc.get("batch", {}).get("attention_mask", {})
        if mask is not None and mask.dim() == 4 and "from" in block:
            self.mask2d = batchfile._mask_2d(block["from"])
        case["mask2d"] = self.mask2d
        b, lq, lk = case["batch_size"], case["query_length"], case["kv_length"]
        self.b, self.lq, self.lk = b, lq, lk
        dt = ctx.dtype
        self.q = leaf(ctx.randn((b, lq, ctx.heads, ctx.dim), 1, dtype=_gen_dtype(dt)), dt, ctx.device_for("q"))
        self.k = leaf(ctx.randn((b, lk, ctx.kv_heads, ctx.dim), 2, dtype=_gen_dtype(dt)), dt, ctx.device_for("k"))
        self.v = leaf(ctx.randn((b, lk, ctx.kv_heads, ctx.dim), 3, dtype=_gen_dtype(dt)), dt, ctx.device_for("v"))
        self.noncontiguous = [n for n in ("q", "k", "v") if ctx.tensors.get(n, {}).get("contiguous") is False]
        for key, value in list(case["flash_kwargs"].items()):
            if isinstance(value, list):
                which = "cu_seqlens_q" if key.endswith("_q") else "cu_seqlens_k"
                dtype = _dtype(ctx.tensors.get(which, {}).get("dtype"), torch.int32)
                case["flash_kwargs"][key] = torch.tensor(value, dtype=dtype, device=ctx.device_for(which))
        self.rotary = None
        self.conversion = conversion
        self.target = None
        if conversion == "transformers":
            release = ctx.env.get("transformers")
            if release and ".dev" in release:
                raise NotMeasured(f"transformers {release} is a development snapshot, not a published release")
            transformers, origin = stack.load_transformers(release)
            if not release:
                ctx.notes.append(f"the batch names no transformers release: the device's transformers "
                                 f"{transformers.__version__} ran the conversion")
            stack.ensure_flash_attn_available(ctx.dry)
            import tracing
            self.target = tracing.load_target()
            stack.PATCHES.extend(p for p in tracing.PATCHES if p not in stack.PATCHES)
            self.stack = {"attention": "PyTorch's bundled FA2 through the oracle's stand-in flash_attn "
                                       f"(impersonating flash-attn {case['flash_attn']})",
                          "conversion": f"transformers {transformers.__version__} {self.target.describe()['entry_point']} "
                                        f"({origin})"}
        else:
            self.stack = {"attention": "PyTorch's bundled FA2 through the oracle's stand-in flash_attn",
                          "conversion": ("flash_attn.bert_padding.unpad_input / pad_input (the stand-in's, "
                                         "tools/parity/standin)" if mask is not None else "none (dense call)")}
        seqs, source = reference.derive_intent(ctx.doc, case)
        if seqs is None:
            seqs, source = [(r, 0, lk) for r in range(b)], "rows"
        width = self.mask2d.shape[1] if self.mask2d is not None else lk
        if width > lk:  # a mask wider than the keys: the intent is aligned with the last keys
            seqs = [(r, s - (width - lk), n) for r, s, n in seqs]
            ctx.notes.append(f"the mask is {width} wide but keys have {lk} rows: the reference aligns the intent "
                             "with the last keys")
        self.intent, self.intent_source = seqs, source

    def leaves(self):
        return self.q, self.k, self.v

    def _view(self, name, x):
        if name in self.noncontiguous:  # same values, the strides of a (B, H, L, D) projection transposed
            return x.transpose(1, 2).contiguous().transpose(1, 2)
        return x

    def forward(self):
        q, k, v = (self._view(n, x) for n, x in (("q", self.q), ("k", self.k), ("v", self.v)))
        if self.rotary is not None:
            q, k = self.rotary.apply(q, k, self)
        if self.conversion == "transformers":
            self.target.call(self.case, qkv=(q, k, v))
            return self.target.last_output
        import flash_attn
        from flash_attn import bert_padding
        mask = self.case["attention_mask"]
        if mask is None:
            return flash_attn.flash_attn_func(q, k, v, causal=self.ctx.causal, window_size=self.ctx.window,
                                              softcap=self.ctx.softcap)
        mask = mask.to(q.device)
        unpadded_q, indices_q, cu_q, max_q = bert_padding.unpad_input(q, mask[:, -self.lq:])[:4]
        unpadded_k, _, cu_k, max_k = bert_padding.unpad_input(k, mask)[:4]
        unpadded_v = bert_padding.unpad_input(v, mask)[0]
        out = flash_attn.flash_attn_varlen_func(unpadded_q, unpadded_k, unpadded_v, cu_q, cu_k, max_q, max_k,
                                                causal=self.ctx.causal, window_size=self.ctx.window,
                                                softcap=self.ctx.softcap)
        return bert_padding.pad_input(out, indices_q, self.b, self.lq)

    def sequences(self):
        return reference.padded_sequences(self.intent, self.b, self.lq, self.lk)


class Rotary:
    """The rotary of the batch's `rotary` block, applied to q and k before the attention."""

    def __init__(self, ctx, owner):
        import torch
        r = ctx.doc["rotary"]
        self.ctx, self.r = ctx, r
        self.impl = r.get("implementation", "flash_attn")
        self.dim = r["dim"]
        self.base = r.get("base", 10000.0)
        self.interleaved = r.get("interleaved", False)
        self.layout = r.get("layout", "BTHD")
        self.table_length = r.get("table_length")
        has_cu = isinstance(owner, Explicit) and not any(isinstance(x, list) for x in owner.cu_q_values)
        self.varlen = r.get("varlen", has_cu)
        offset = r.get("seqlen_offset", 0)
        self.offset = (torch.tensor(offset, dtype=torch.int32, device=ctx.device) if isinstance(offset, list)
                       else int(offset))
        if ctx.dry:
            raise NotMeasured("dry-cpu: the Triton rotary kernels need a GPU")
        if self.impl == "fla":
            version = ctx.env.get("fla") or DEFAULT_FLA
            if not ctx.env.get("fla"):
                ctx.notes.append(f"the batch names no FLA release: FLA {version} ran the rotary")
            module = stack.load_fla_rotary(version)
            self.rope = module.RotaryEmbedding(dim=self.dim, base=self.base, interleaved=self.interleaved).to(ctx.device)
            self.description = f"FLA {version} fla.modules.rotary.RotaryEmbedding(dim={self.dim})"
        elif self.impl == "flash_attn":
            version = ctx.env.get("flash_attn") or DEFAULT_FLASH_ATTN
            self.layer = stack.load_flash_attn_rotary(version)
            self.description = f"flash-attn {version} flash_attn.layers.rotary.apply_rotary_emb (Triton)"
        else:
            raise NotMeasured(f"rotary implementation {self.impl!r}: the oracle runs FLA's and flash-attn's kernels only")

    def _table(self, rows, dtype):
        import torch
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=self.ctx.device, dtype=torch.float32)
                                        / self.dim))
        t = torch.arange(rows, device=self.ctx.device, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        return torch.cos(freqs).to(dtype), torch.sin(freqs).to(dtype)

    def apply(self, q, k, owner):
        """q: (T, H, D) packed or (B, T, H, D) -> rotated q, k of the same shapes."""
        packed = q.dim() == 3
        cu = owner.cu_q if (self.varlen and isinstance(owner, Explicit)) else None
        max_seqlen = owner.max_q if isinstance(owner, Explicit) else None
        if isinstance(max_seqlen, object) and hasattr(max_seqlen, "item"):
            max_seqlen = int(max_seqlen.item())
        if self.impl == "fla":
            q4 = q.unsqueeze(0) if packed else q
            k4 = k.unsqueeze(0) if packed else k
            if self.layout == "BHTD":
                q4, k4 = q4.transpose(1, 2).contiguous(), k4.transpose(1, 2).contiguous()
            ms = self.table_length if self.table_length is not None else (max_seqlen if cu is not None else None)
            rq, rk = self.rope(q4, k4, seqlen_offset=self.offset, cu_seqlens=cu, max_seqlen=ms)
            if self.layout == "BHTD":
                rq, rk = rq.transpose(1, 2), rk.transpose(1, 2)
            return (rq.squeeze(0), rk.squeeze(0)) if packed else (rq, rk)
        seqlen = q.shape[0] if packed else q.shape[1]
        rows = self.table_length if self.table_length is not None else (
            max_seqlen if cu is not None else seqlen + (self.offset if isinstance(self.offset, int) else 0))
        cos, sin = self._table(rows, q.dtype)
        if packed and cu is None:
            rq = self.layer.apply_rotary_emb(q.unsqueeze(0), cos, sin, interleaved=self.interleaved,
                                             seqlen_offsets=self.offset).squeeze(0)
            rk = self.layer.apply_rotary_emb(k.unsqueeze(0), cos, sin, interleaved=self.interleaved,
                                             seqlen_offsets=self.offset).squeeze(0)
            return rq, rk
        kwargs = dict(interleaved=self.interleaved, seqlen_offsets=self.offset)
        if cu is not None:
            kwargs.update(cu_seqlens=cu, max_seqlen=max_seqlen)
        return (self.layer.apply_rotary_emb(q, cos, sin, **kwargs), self.layer.apply_rotary_emb(k, cos, sin, **kwargs))

    def reference_dims(self, head_dim):
        """(dim the model meant, columns rotated): the dim passed when it fits the head, else the head's."""
        rotated = min(self.dim, head_dim) // 2 * 2
        meant = self.dim if self.dim <= head_dim else head_dim
        return meant, rotated


def _flatten(values):
    for x in values:
        if isinstance(x, list):
            yield from _flatten(x)
        else:
            yield x


def _gen_dtype(dtype):
    """Random inputs are drawn in the tensor's dtype when torch can (fp16/bf16/fp32), else in
    fp32 and cast (fp8)."""
    import torch
    return dtype if dtype in (torch.float16, torch.bfloat16, torch.float32) else None


# ---------------------------------------------------------------------------------------
# measuring

def describe_exception(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    chain = []
    markers = ("/transformers/", "/flash_attn", "/fla/", "/standin/", "/oracle/case.py")
    for frame in frames:
        file = frame.filename.replace("\\", "/")
        if any(m in file for m in markers) and frame.name not in ("<module>", "measure", "main", "run_case"):
            chain.append(frame.name)
    last = frames[-1] if frames else None
    message = str(exc).strip()
    return {"exception": type(exc).__name__, "message": message,
            "where": " > ".join(chain),
            "line": f"{Path(last.filename).name}:{last.lineno}: {(last.line or '').strip()}" if last else ""}


def sync():
    import torch
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def measure(fn, name=None):
    """-> (value, None) or (None, failure dict with the outcome class). `name` ("forward",
    "backward"): the pass, announced on stdout as it starts and ends, so the runner's watchdog
    can tell a call that never returned (a hang) from a harness that was slow elsewhere."""
    try:
        if name:
            print(f"ORACLE-ENTER {name} {time.time():.3f}", flush=True)
        value = fn()
        sync()
        if name:
            print(f"ORACLE-LEAVE {name}", flush=True)
        return value, None
    except NotMeasured:
        raise
    except Exception as exc:  # the stack's own failure is the measurement
        # the stand-in's NotRepresentable (only where a call went through the stand-in; an
        # explicit call goes to PyTorch's FA2 directly and no flash_attn dist-info exists)
        standin = sys.modules.get("flash_attn.flash_attn_interface")
        if standin is not None and isinstance(exc, getattr(standin, "NotRepresentable", ())):
            raise
        info = describe_exception(exc)
        info["outcome"] = outcome.classify_exception(info["exception"], info["message"])
        return None, info


def compare(run, out, grads, do):
    """Reference over the intended sequences -> (forward findings, backward findings)."""
    import torch
    ctx = run.ctx
    q, k, v = run.leaves()
    H, D = ctx.heads, ctx.dim
    scale = reference.scale_for(D)
    seqs = run.sequences()
    out_flat = out.detach().reshape(-1, H, D) if out is not None and out.numel() % (H * D) == 0 else None
    fwd = {"checked_rows": 0, "wrong": [], "worst_error": 0.0, "nan": []}
    bwd = {name: {"wrong": [], "worst_error": 0.0, "nan": []} for name in ("dq", "dk", "dv")}
    sampled = False
    q_flat = q.detach().reshape(-1, H, D)
    k_flat = k.detach().reshape(-1, ctx.kv_heads, D)
    v_flat = v.detach().reshape(-1, ctx.kv_heads, D)
    do_flat = do.reshape(-1, H, D) if do is not None else None
    want_grads = grads is not None
    # tensors past 1 GiB in fp32 are compared sequence by sequence (no full-size reference
    # gradients); rows outside every intended sequence are then not compared
    per_sequence = q_flat.numel() * 4 > (1 << 30)
    if per_sequence:
        for g in bwd.values():
            g["checked_rows"] = 0
    if want_grads and not per_sequence:
        dq_ref = torch.zeros(q_flat.shape, dtype=torch.float32, device=q.device)
        dk_ref = torch.zeros(k_flat.shape, dtype=torch.float32, device=k.device)
        dv_ref = torch.zeros(v_flat.shape, dtype=torch.float32, device=v.device)
    rot = run.rotary
    for seq in seqs:
        q_rows, k_rows, q_slots, k_slots = seq.q_rows, seq.k_rows, seq.q_slots, seq.k_slots
        if len(q_rows) * len(k_rows) * H > BIG_SCORES:
            pick = torch.unique(torch.cat([torch.linspace(0, len(q_rows) - 1, SAMPLED_ROWS).long(),
                                           _overflow_rows(q_rows, H * D)]))
            q_rows, q_slots = q_rows[pick], q_slots[pick]
            sampled = True
        dev = q.device
        qs = q_flat[q_rows.to(dev)].float()
        ks = k_flat[k_rows.to(dev)].float()
        vs = v_flat[k_rows.to(dev)].float()
        if rot is not None:
            meant, rotated = rot.reference_dims(D)
            q_start = int(seq.q_slots[0]) - int(seq.k_slots[0]) if len(seq.k_slots) else 0
            qpos = q_slots - q_slots[0] + q_start
            kpos = k_slots - k_slots[0]
            cq, sq = reference.rotary_tables(meant, rotated, rot.base, qpos, dev)
            ck, sk = reference.rotary_tables(meant, rotated, rot.base, kpos, dev)
            qs = reference.rotate(qs, cq, sq, rot.interleaved)
            ks = reference.rotate(ks, ck, sk, rot.interleaved)
        dos = do_flat[seq.out_rows[_pick_index(seq, q_rows)].to(dev)].float() if want_grads else None
        ro, rdq, rdk, rdv = reference.sequence_reference(qs, ks, vs, dos, q_slots, k_slots, ctx.causal, ctx.window,
                                                         ctx.softcap, scale, want_grads)
        out_rows = seq.out_rows[_pick_index(seq, q_rows)]
        if out_flat is not None:
            valid = out_rows < out_flat.shape[0]
            rows = out_rows[valid]
            bad, worst, nan = reference.wrong_rows(out_flat[rows.to(dev)], ro[valid.to(dev)], rows, ctx.dtype)
            fwd["wrong"].extend(bad.tolist())
            fwd["nan"].extend(nan.tolist())
            fwd["worst_error"] = max(fwd["worst_error"], worst)
            fwd["checked_rows"] += len(rows)
        if want_grads:
            if rot is not None:
                rdq = reference.rotate(rdq, cq, sq, rot.interleaved, inverse=True)
                rdk = reference.rotate(rdk, ck, sk, rot.interleaved, inverse=True)
            if per_sequence:
                pairs = [("dq", grads[0], q_rows, rdq, H)] + ([] if sampled else [
                    ("dk", grads[1], k_rows, rdk, ctx.kv_heads), ("dv", grads[2], k_rows, rdv, ctx.kv_heads)])
                for name, actual, rows, expected, heads in pairs:
                    if actual is None:
                        continue
                    got = actual.reshape(-1, heads, D)[rows.to(dev)]
                    bad, worst, nan = reference.wrong_rows(got, expected, rows, ctx.dtype, relative_to_max=True)
                    g = bwd[name]
                    g["wrong"].extend(bad.tolist())
                    g["nan"].extend(nan.tolist())
                    g["worst_error"] = max(g["worst_error"], worst)
                    g["checked_rows"] += len(rows)
                continue
            dq_ref.index_add_(0, q_rows.to(dev), rdq)
            if not sampled:
                dk_ref.index_add_(0, k_rows.to(dev), rdk)
                dv_ref.index_add_(0, k_rows.to(dev), rdv)
    if per_sequence and want_grads:
        for name in ("dk", "dv"):
            if sampled:
                bwd[name]["skipped"] = "reference sampled: dk/dv need every query row"
        return fwd, bwd, sampled
    if want_grads:
        checked = {"dq": (grads[0], dq_ref, q_flat.shape[0]), "dk": (grads[1], dk_ref, k_flat.shape[0]),
                   "dv": (grads[2], dv_ref, v_flat.shape[0])}
        sampled_rows = None
        if sampled:
            sampled_rows = torch.unique(torch.cat([s.q_rows for s in seqs]))
        grad_scale = max(float(t.abs().max()) if t.numel() else 0.0 for t in (dq_ref, dk_ref, dv_ref))
        for name, (actual, expected, n) in checked.items():
            if actual is None:
                bwd[name]["missing"] = True
                continue
            if sampled and name != "dq":
                bwd[name]["skipped"] = "reference sampled: dk/dv need every query row"
                continue
            actual = actual.reshape(n, -1)
            rows = torch.arange(n) if not sampled else _sample_rows(seqs, H * D)
            bad, worst, nan = reference.wrong_rows(actual[rows.to(actual.device)], expected[rows.to(actual.device)],
                                                   rows, ctx.dtype, relative_to_max=True, scale_floor=grad_scale)
            bwd[name].update(wrong=bad.tolist(), worst_error=worst, nan=nan.tolist(), checked_rows=len(rows))
    return fwd, bwd, sampled


def _pick_index(seq, q_rows):
    """Positions of `q_rows` (possibly a sample) within the sequence's rows."""
    import torch
    if len(q_rows) == len(seq.q_rows):
        return torch.arange(len(q_rows))
    lookup = {int(r): i for i, r in enumerate(seq.q_rows.tolist())}
    return torch.tensor([lookup[int(r)] for r in q_rows.tolist()])


def _overflow_rows(q_rows, row_elems):
    """Rows on either side of each multiple of 2^31 elements of a (rows, H, D) tensor."""
    import torch
    first, last = int(q_rows[0]), int(q_rows[-1])
    picks = []
    step = (1 << 31) // row_elems
    m = step
    while m <= last + 1:
        for r in range(m - 64, m + 64):
            if first <= r <= last:
                picks.append(r - first)
        m += step
    return torch.tensor(picks, dtype=torch.long) if picks else torch.zeros(0, dtype=torch.long)


def _sample_rows(seqs, row_elems):
    import torch
    rows = []
    for s in seqs:
        idx = torch.unique(torch.cat([torch.linspace(0, len(s.q_rows) - 1, SAMPLED_ROWS).long(),
                                      _overflow_rows(s.q_rows, row_elems)]))
        rows.append(s.q_rows[idx])
    return torch.unique(torch.cat(rows))


def silent_message(kind, wrong, total, tensor="output"):
    if not wrong:
        return f"no error; every intended {tensor} row is right ({total} checked)"
    spans = reference.ranges(wrong)
    text = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans[:8]) + (" ..." if len(spans) > 8 else "")
    return f"no error; rows {text} of the {tensor} are wrong ({len(wrong)} of {total} checked)"


# ---------------------------------------------------------------------------------------
# one case

def poison_allocator(notes):
    """A training process reuses memory: the rows a kernel leaves unwritten in a torch.empty
    tensor hold whatever the last tensor there held (NaN gradients in Dao-AILab/flash-attention#1661),
    while a fresh process's first allocations are usually zero and hide them. With ORACLE_POISON=1
    the caching allocator's pools are filled with NaN and released (kept cached) before the call:
    small blocks (2 MiB segments, c10/cuda/CUDACachingAllocator.cpp) and large ones."""
    import torch
    if os.environ.get("ORACLE_POISON") != "1" or not torch.cuda.is_available():
        return
    held = [torch.full((256 * 1024,), float("nan"), device="cuda") for _ in range(64)]  # 64 x 1 MiB, small pool
    held += [torch.full((n * 256 * 1024,), float("nan"), device="cuda") for n in (16, 64, 256)]  # 16, 64, 256 MiB
    torch.cuda.synchronize()
    del held
    notes.append("poisoned: the caching allocator's free blocks (64 MiB small, 336 MiB large) held NaN before the "
                 "call, as a training process's reused memory holds stale values")


def run_case(path, mode, dry):
    import torch
    path = Path(path).resolve()
    doc = json.loads(path.read_text())
    rel = os.path.relpath(path, REPO)
    notes = []
    rec = {"id": path.stem, "batch": rel, "mode": mode, "dry_cpu": dry, "pass": doc.get("pass", "forward"),
           "stack": {}, "forward": None, "backward": None, "notes": notes, "patches": stack.PATCHES}
    if dry:
        os.environ["ORACLE_DRY_CPU"] = "1"
        notes.append("dry-cpu: the attention is a plain PyTorch stand-in (tools/oracle/dry_attention.py), "
                     "NOT the kernel; never a golden")
    try:
        kind = kind_of(doc)
        rec["kind"] = kind
        env = doc.get("environment", {})
        fa_version = env.get("flash_attn") or DEFAULT_FLASH_ATTN
        if not env.get("flash_attn_4"):  # the stand-in's flash_attn package would hide flash_attn.cute
            stack.install_standin(fa_version, os.environ.get("ORACLE_WORK", "/tmp/oracle-work"))
        torch.manual_seed(0)
        if not dry:
            poison_allocator(notes)
        ctx = Ctx(path, doc, dry, notes)
        if kind == "explicit":
            run = Explicit(ctx)
        elif kind == "transformers":
            run = Padded(ctx, "transformers")
        else:  # rotary
            run = Explicit(ctx) if "varlen" in doc else Padded(ctx, "flash_attn")
            run.rotary = Rotary(ctx, run)
            run.stack["rotary"] = run.rotary.description
        rec["stack"] = run.stack
        rec["reference"] = {"intent": run.intent_source, "sequences": len(run.intent)}
        q, k, v = run.leaves()
        rec["shapes"] = {"q": list(q.shape), "k": list(k.shape), "v": list(v.shape)}
        t0 = time.time()
        out, failure = measure(run.forward, "forward")
        rec["forward"] = {"seconds": round(time.time() - t0, 3)}
        if failure is not None:
            rec["forward"].update(failure)
            return rec
        if not isinstance(out, torch.Tensor):
            raise NotMeasured(f"the stack returned {type(out).__name__}, not a tensor")
        rec["shapes"]["out"] = list(out.shape)
        if mode == "sanitize":
            print("ORACLE-MARK backward", flush=True)
        do = ctx.randn(tuple(out.shape), 4).to(out.dtype)
        t0 = time.time()
        _, failure = measure(lambda: (out * do).sum().backward(), "backward")
        rec["backward"] = {"seconds": round(time.time() - t0, 3)}
        if failure is not None:
            rec["backward"].update(failure)
            grads = None
        else:
            grads = (q.grad, k.grad, v.grad)
        if mode == "sanitize":
            return rec
        t0 = time.time()
        with torch.no_grad():
            fwd, bwd, sampled = compare(run, out, grads, do)
        rec["reference"]["seconds"] = round(time.time() - t0, 3)
        if sampled:
            rec["reference"]["sampled"] = True
            notes.append(f"reference sampled: {SAMPLED_ROWS} query rows per long sequence plus the rows around each "
                         "2^31-element boundary; dk/dv not compared")
        if ctx.env.get("flash_attn_4") and "window_size" in doc.get("varlen", {}):
            # FA4 resolves the window its own way (_resolve_causal_local_window): the same output is
            # also compared with attention without any window or causal mask, so the record says
            # which of the two the kernel computed
            saved = ctx.window, ctx.causal
            ctx.window, ctx.causal = (-1, -1), False
            with torch.no_grad():
                full, _, _ = compare(run, out, None, None)
            ctx.window, ctx.causal = saved
            zero = (out.detach().reshape(out.shape[0], -1) == 0).all(dim=1).nonzero().flatten().tolist()
            rec["forward"]["against_full_attention"] = {
                "rows": reference.ranges(sorted(set(full["wrong"]))), "worst_error": full["worst_error"],
                "checked_rows": full["checked_rows"], "zero_rows": reference.ranges(zero)}
        wrong = sorted(set(fwd["wrong"]))
        rec["forward"].update(outcome=outcome.silent_forward(wrong, 0), rows=reference.ranges(wrong),
                              message=silent_message("forward", wrong, fwd["checked_rows"]),
                              worst_error=fwd["worst_error"], checked_rows=fwd["checked_rows"])
        if fwd["nan"]:
            rec["forward"]["nan_rows"] = reference.ranges(fwd["nan"])
        if grads is not None:
            grad_rows = {}
            for name in ("dq", "dk", "dv"):
                g = bwd[name]
                entry = {"rows": reference.ranges(g["wrong"]), "worst_error": g.get("worst_error", 0.0)}
                if g.get("nan"):
                    entry["nan_rows"] = reference.ranges(g["nan"])
                for extra in ("skipped", "missing", "checked_rows"):
                    if extra in g:
                        entry[extra] = g[extra]
                grad_rows[name] = entry
            first = next((n for n in ("dq", "dk", "dv") if bwd[n]["wrong"]), None)
            rec["backward"].update(
                outcome=outcome.silent_backward(bool(first), 0), grads=grad_rows,
                rows=reference.ranges(bwd[first]["wrong"]) if first else [],
                message=(silent_message("backward", sorted(bwd[first]["wrong"]), bwd[first].get("checked_rows", 0), first)
                         if first else "no error; every dq, dk and dv row is right"))
            if first and bwd[first].get("nan"):
                rec["backward"]["message"] += " (NaN in some)"
        return rec
    except NotMeasured as exc:
        rec["not_measured"] = str(exc)
        return rec
    except Exception as exc:  # not the stack's failure: the harness could not build the call
        if type(exc).__name__ == "NotRepresentable":
            rec["not_measured"] = str(exc)
            return rec
        rec["harness_error"] = describe_exception(exc)
        rec["harness_error"]["traceback"] = traceback.format_exc()[-4000:]
        return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("batch")
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=["run", "sanitize"], default="run")
    ap.add_argument("--dry-cpu", action="store_true")
    args = ap.parse_args()
    rec = run_case(args.batch, args.mode, args.dry_cpu)
    tmp = Path(args.out + ".tmp")
    tmp.write_text(json.dumps(rec, indent=1, default=str))
    tmp.replace(args.out)
    print("ORACLE-DONE", flush=True)


if __name__ == "__main__":
    main()
