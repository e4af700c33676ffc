"""`attn_implementation="attn_doctor"`: transformers models on the checked kernels.

    import attn_doctor.hf                     # registers the implementation (transformers >= 4.51)
    model = AutoModelForCausalLM.from_pretrained(..., attn_implementation="attn_doctor")

The attention function is registered with transformers' AttentionInterface and its mask with
AttentionMaskInterface (the mask flash-attention gets: None, or the 2D padding mask). Like
flash-attention's integration (transformers 5.x, modeling_flash_attention_utils.py
_flash_attention_forward) it takes, in this order:
  - cu_seq_lens_q / cu_seq_lens_k / max_length_q / max_length_k keyword arguments (a packing
    collator's flash kwargs): the batch flattened, one varlen call;
  - a 2D padding mask: the tokens gathered (unpad), one varlen call, the output scattered back;
  - packed position ids (batch 1, positions restarting): cu_seqlens from the restarts;
  - otherwise the dense batch as B segments of the same length (no host read).
Every call goes through attn_doctor.ops.varlen_fwd (a custom op, autograd through varlen_bwd).
The mask path and the position-ids path read values on the host (max_seqlen is an int), as
transformers' own flash path does. Under torch.compile position ids are not inspected (that
would break the graph): a packed batch is passed with the flash kwargs there
(DataCollatorWithFlattening(return_flash_attn_kwargs=True) writes them).
"""
import math
from typing import Any, Optional

import torch

from . import ops

NAME = "attn_doctor"


def _window(sliding_window: Optional[int], key_length: int):
    # transformers 5.x _process_flash_attention_kwargs: a window only when the keys pass it
    if sliding_window is not None and key_length > sliding_window:
        return sliding_window - 1, sliding_window - 1
    return -1, -1


def _packed_position_ids(position_ids: Any, batch_size: int) -> bool:
    if position_ids is None or batch_size != 1 or position_ids.dim() != 2:
        return False
    if torch.compiler.is_compiling():
        # reading the values would break the graph: under torch.compile a packed batch comes
        # with the flash kwargs (cu_seq_lens_q/k, max_length_q/k), as the documentation says
        return False
    if position_ids.shape[1] < 2:
        return False
    # a restart anywhere after the first token: packed (what _is_packed_sequence asks)
    return bool((position_ids[0, 1:] - position_ids[0, :-1] != 1).any())


def _cu_from_position_ids(position_ids: torch.Tensor):
    pos = position_ids.reshape(-1)
    starts = torch.nonzero(pos == 0).reshape(-1).to(torch.int32)
    if starts.numel() == 0 or int(starts[0]) != 0:
        starts = torch.cat([torch.zeros(1, dtype=torch.int32, device=pos.device), starts])
    cu = torch.cat([starts, torch.tensor([pos.numel()], dtype=torch.int32, device=pos.device)])
    max_len = int((cu[1:] - cu[:-1]).max())
    return cu, max_len


def attention_forward(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: Optional[torch.Tensor], dropout: float = 0.0, scaling: Optional[float] = None,
                      sliding_window: Optional[int] = None, softcap: Optional[float] = None,
                      is_causal: Optional[bool] = None, **kwargs: Any):
    """transformers' attention-function signature: query (B, H, S, D), key / value (B, Hk, Sk, D);
    returns (attn_output (B, S, H, D), None)."""
    if dropout and getattr(module, "training", False):
        raise NotImplementedError("attn_implementation='attn_doctor': attention dropout is not run by the checked "
                                  "kernels (set attention_dropout=0.0)")
    B, H, S, D = query.shape
    Sk = key.shape[2]
    q = query.transpose(1, 2)
    k = key.transpose(1, 2)
    v = value.transpose(1, 2)
    scale = float(scaling) if scaling is not None else 1.0 / math.sqrt(D)
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    wl, wr = _window(sliding_window, Sk)
    cap = float(softcap or 0.0)
    grad = ops._training(query, key, value)

    def run(qp, kp, vp, cu_q, cu_k, max_q, max_k):
        out, _ = torch.ops.attn_doctor.varlen_fwd(qp, kp, vp, cu_q, cu_k, int(max_q), int(max_k), scale, causal, wl,
                                                  wr, cap, "transformers", grad)
        return out

    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    max_q, max_k = kwargs.get("max_length_q"), kwargs.get("max_length_k")
    if all(x is not None for x in (cu_q, cu_k, max_q, max_k)):
        out = run(q.reshape(-1, H, D), k.reshape(-1, k.shape[2], D), v.reshape(-1, v.shape[2], D), cu_q, cu_k,
                  max_q, max_k)
        return out.view(B, S, H, D), None
    if attention_mask is not None and attention_mask.dim() == 2:
        mask = attention_mask[:, -Sk:].to(torch.bool)
        lengths_k = mask.sum(-1, dtype=torch.int32)
        idx_k = torch.nonzero(mask.reshape(-1)).reshape(-1)
        zero = torch.zeros(1, dtype=torch.int32, device=q.device)
        cu_k = torch.cat([zero, torch.cumsum(lengths_k, 0, dtype=torch.int32)])
        kp = k.reshape(B * Sk, -1, D).index_select(0, idx_k)
        vp = v.reshape(B * Sk, -1, D).index_select(0, idx_k)
        if S == Sk:
            idx_q, cu_q, mq = idx_k, cu_k, int(lengths_k.max())
        else:  # queries are the last S positions (decoding with a cache)
            qmask = mask[:, -S:]
            idx_q = torch.nonzero(qmask.reshape(-1)).reshape(-1)
            cu_q = torch.cat([zero, torch.cumsum(qmask.sum(-1, dtype=torch.int32), 0, dtype=torch.int32)])
            mq = int(qmask.sum(-1).max())
        qp = q.reshape(B * S, H, D).index_select(0, idx_q)
        out = run(qp, kp, vp, cu_q, cu_k, mq, int(lengths_k.max()))
        full = out.new_zeros((B * S, H, D)).index_copy(0, idx_q, out)
        return full.view(B, S, H, D), None
    position_ids = kwargs.get("position_ids")
    if _packed_position_ids(position_ids, B) and S == Sk:
        cu, mx = _cu_from_position_ids(position_ids)
        out = run(q.reshape(-1, H, D), k.reshape(-1, k.shape[2], D), v.reshape(-1, v.shape[2], D), cu, cu, mx, mx)
        return out.view(B, S, H, D), None
    cu_q = torch.arange(0, (B + 1) * S, S, dtype=torch.int32, device=q.device)
    cu_k = torch.arange(0, (B + 1) * Sk, Sk, dtype=torch.int32, device=q.device)
    out = run(q.reshape(-1, H, D), k.reshape(-1, k.shape[2], D), v.reshape(-1, v.shape[2], D), cu_q, cu_k, S, Sk)
    return out.view(B, S, H, D), None


def register() -> bool:
    """Registers "attn_doctor" with transformers (idempotent); False when transformers has no
    AttentionInterface (4.50 and before)."""
    try:
        from transformers import AttentionInterface
    except ImportError:
        return False
    AttentionInterface.register(NAME, attention_forward)
    try:
        from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask
    except ImportError:  # releases without the mask interface build the mask per model
        return True
    AttentionMaskInterface.register(NAME, flash_attention_mask)
    return True


register()
