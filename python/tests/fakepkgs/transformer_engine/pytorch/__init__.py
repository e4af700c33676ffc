"""A stand-in for transformer_engine.pytorch.DotProductAttention with the signature of TE
2.12's DotProductAttention.__init__ (the arguments the hook reads) and forward
(transformer_engine/pytorch/attention/dot_product_attention/dot_product_attention.py). Its
forward records the call and returns an output of q's shape: it checks nothing and never
fails, so what a test sees is the hook's doing."""
from faketensor import FakeTensor

CALLS = []


class FakeGroup:
    """A process group as far as the hook asks: its size and this process's rank."""

    def __init__(self, size, rank):
        self._size, self._rank = size, rank

    def size(self):
        return self._size

    def rank(self):
        return self._rank


class DotProductAttention:
    def __init__(self, num_attention_heads, kv_channels, num_gqa_groups=None, attention_dropout=0.0,
                 qkv_format="sbhd", attn_mask_type="causal", window_size=None, sequence_parallel=False,
                 tp_size=1, get_rng_state_tracker=None, tp_group=None, layer_number=None,
                 attention_type="self", cp_group=None, cp_global_ranks=None, cp_stream=None,
                 cp_comm_type="p2p", softmax_scale=None):
        self.qkv_format = qkv_format
        self.attn_mask_type = attn_mask_type
        self.cp_group = cp_group
        self.cp_comm_type = cp_comm_type

    def set_context_parallel_group(self, cp_group, cp_global_ranks, cp_stream, cp_comm_type="p2p"):
        self.cp_group = cp_group
        self.cp_comm_type = cp_comm_type

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, query_layer, key_layer, value_layer, attention_mask=None, qkv_format=None,
                cu_seqlens_q=None, cu_seqlens_kv=None, cu_seqlens_q_padded=None, cu_seqlens_kv_padded=None,
                max_seqlen_q=None, max_seqlen_kv=None, attn_mask_type=None, window_size=None,
                checkpoint_core_attention=False, core_attention_bias_type="no_bias", core_attention_bias=None,
                alibi_slopes=None, fast_zero_fill=True, inference_params=None, pad_between_seqs=None,
                fp8_output=False):
        CALLS.append((qkv_format or self.qkv_format, tuple(query_layer.shape)))
        return FakeTensor(shape=query_layer.shape, dtype=query_layer.dtype.name, device=query_layer.device)
