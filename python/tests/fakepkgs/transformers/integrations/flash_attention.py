from ..modeling_flash_attention_utils import _flash_attention_forward


def flash_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                            sliding_window=None, softcap=None, **kwargs):
    # query: (B, H, L, D) as the model holds it; FA2 takes (B, L, H, D)
    seq_len = query.shape[2]
    out = _flash_attention_forward(query.transpose(1, 2), key.transpose(1, 2),
                                   value.transpose(1, 2), attention_mask, query_length=seq_len,
                                   is_causal=module.is_causal, dropout=dropout,
                                   softmax_scale=scaling, sliding_window=sliding_window,
                                   softcap=softcap, layer_idx=module.layer_idx, **kwargs)
    return out, None
