"""A stand-in `flash_attn` 2.x package for attn-doctor's guard measurements on machines
without flash-attn: every call goes straight to the FA2 kernel bundled in PyTorch
(`torch.ops.aten._flash_attention_forward`, differentiable), with the arguments exactly as
given. It checks nothing and emulates no failure: what the caller passes is what the
kernel gets, so a bad call fails as the real kernel fails. The dist-info beside it makes
transformers see an installed flash-attn 2.8.3. Not the real package."""
__version__ = "2.8.3"

from .flash_attn_interface import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: F401
