"""Stand-in for flash_attn.layers.rotary: transformers >= 4.52 imports `apply_rotary_emb`
at module import; the conversion replay never calls it."""


def apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0,
                     cu_seqlens=None, max_seqlen=None):
    raise NotImplementedError("stand-in flash_attn: apply_rotary_emb is not provided")
