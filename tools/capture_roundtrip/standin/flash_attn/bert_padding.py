"""Stand-in for flash_attn.bert_padding (2.7+ contract: unpad_input returns five values)."""
import torch
import torch.nn.functional as F


def index_first_axis(tensor, indices):
    """Rows `indices` of a tensor whose first axis is already the flattened token axis."""
    return tensor[indices]


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    """hidden_states (B, S, ...) -> (total, ...), indices, cu_seqlens, max_seqlen, used."""
    all_masks = attention_mask + unused_mask if unused_mask is not None else attention_mask
    seqlens = all_masks.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(all_masks.flatten(), as_tuple=False).flatten()
    max_seqlen = seqlens.max().item()
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return index_first_axis(flat, indices), indices, cu_seqlens, max_seqlen, used


def pad_input(hidden_states, indices, batch, seqlen):
    out = torch.zeros((batch * seqlen, *hidden_states.shape[1:]), device=hidden_states.device,
                      dtype=hidden_states.dtype)
    out[indices] = hidden_states
    return out.view(batch, seqlen, *hidden_states.shape[1:])
