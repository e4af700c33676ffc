"""Stand-in for flash_attn.bert_padding (own implementation, same semantics).

Semantics reproduced from flash-attn's bert_padding.py (2.x): the gather of rows is a
`torch.gather` over the (rows, features) view, so an out-of-range index fails the way torch
fails on the CPU ("index N is out of bounds for dimension 0 with size M", RuntimeError), and
`unpad_input` returns four values before 2.7 and five (plus the used lengths) from 2.7
(flash-attention PR "Add unused_mask to unpad_input", release 2.7.0).
The padding scatter is an index assignment, as in flash-attn.
"""

import importlib.metadata

import torch
import torch.nn.functional as F

from . import _recorder


def _release():
    text = importlib.metadata.version("flash_attn")
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def index_first_axis(input, indices):
    """input: (rows, ...); indices: (n,) -> (n, ...), gathered along the first axis."""
    _recorder.record(
        "index_first_axis",
        input_shape=list(input.shape),
        indices=_recorder.describe_int_tensor(indices),
    )
    assert input.ndim >= 2
    rows, rest = input.shape[0], input.shape[1:]
    flat = input.reshape(rows, -1)
    width = flat.shape[1]
    gathered = torch.gather(flat, 0, indices.reshape(-1, 1).expand(-1, width))
    return gathered.reshape(-1, *rest)


def index_put_first_axis(values, indices, first_axis_dim):
    """values: (n, ...) scattered into zeros (first_axis_dim, ...) at rows `indices`."""
    output = torch.zeros(first_axis_dim, *values.shape[1:], device=values.device, dtype=values.dtype)
    output[indices] = values
    return output


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    """hidden_states: (B, S, ...); attention_mask: (B, S') -> rows where the mask is non-zero.

    Lengths are `mask.sum(-1)` as int32, indices `nonzero(mask.flatten())`, max a host int,
    cu_seqlens the int32 prefix sum with a leading 0.
    """
    if _release() >= (2, 7, 0):
        all_masks = (attention_mask + unused_mask) if unused_mask is not None else attention_mask
    else:
        if unused_mask is not None:
            raise TypeError("unpad_input() takes 2 positional arguments but 3 were given")
        all_masks = attention_mask
    seqlens = all_masks.sum(dim=-1, dtype=torch.int32)
    used_seqlens = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(all_masks.flatten(), as_tuple=False).flatten()
    max_seqlen = seqlens.max().item()
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    _recorder.record(
        "unpad_input",
        hidden_shape=list(hidden_states.shape),
        mask_shape=list(attention_mask.shape),
        indices=_recorder.describe_int_tensor(indices),
        cu_seqlens=_recorder.describe_int_tensor(cu_seqlens),
        max_seqlen=_recorder.describe_max_seqlen(max_seqlen),
        returns=5 if _release() >= (2, 7, 0) else 4,
    )
    rows = hidden_states.reshape(-1, *hidden_states.shape[2:])
    unpadded = index_first_axis(rows, indices)
    if _release() >= (2, 7, 0):
        return unpadded, indices, cu_seqlens, max_seqlen, used_seqlens
    return unpadded, indices, cu_seqlens, max_seqlen


def pad_input(hidden_states, indices, batch, seqlen):
    """hidden_states: (n, ...) -> (batch, seqlen, ...), zeros where nothing was scattered."""
    output = index_put_first_axis(hidden_states, indices, batch * seqlen)
    return output.reshape(batch, seqlen, *hidden_states.shape[1:])
