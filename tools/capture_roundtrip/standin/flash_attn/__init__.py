"""Stand-in for the `flash_attn` package, for attn-doctor's capture round trip on machines
without flash-attn. It records every call's exact varlen arguments in `CALLS` (before
computing, so a failing call is recorded too) and computes attention with PyTorch: the
FA2 kernel bundled in PyTorch (`torch.ops.aten._flash_attention_forward`) on CUDA where it
supports the call, else plain math. The dist-info beside it makes transformers see an
installed flash-attn 2.8.3. Not the real package: never install it for real work."""
__version__ = "2.8.3"

from .flash_attn_interface import (  # noqa: F401
    CALLS,
    flash_attn_func,
    flash_attn_varlen_func,
    flash_attn_with_kvcache,
)
