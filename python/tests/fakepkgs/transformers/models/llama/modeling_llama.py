"""<= 4.41 layout: the model's FA2 class owns `_flash_attention_forward`."""
from faketensor import FakeTensor


class LlamaFlashAttention2:
    def __init__(self, config, layer_idx=0):
        self.config, self.layer_idx, self.is_causal = config, layer_idx, True

    def forward(self, query_states, key_states, value_states, attention_mask):
        return self._flash_attention_forward(query_states, key_states, value_states,
                                             attention_mask, query_states.shape[1])

    def _flash_attention_forward(self, query_states, key_states, value_states, attention_mask,
                                 query_length, dropout=0.0, softmax_scale=None):
        from flash_attn import flash_attn_varlen_func
        rows = attention_mask.tolist()
        lengths = [sum(r) for r in rows]
        cu = [0]
        for n in lengths:
            cu.append(cu[-1] + n)
        b, lq, h, d = query_states.shape
        cu_t = FakeTensor(cu, dtype="int32", device=query_states.device)
        return flash_attn_varlen_func(
            FakeTensor(shape=(cu[-1], h, d), dtype=query_states.dtype.name),
            FakeTensor(shape=(cu[-1], key_states.shape[2], d), dtype=query_states.dtype.name),
            FakeTensor(shape=(cu[-1], key_states.shape[2], d), dtype=query_states.dtype.name),
            cu_t, cu_t, max(lengths), max(lengths), dropout_p=dropout, causal=self.is_causal)
