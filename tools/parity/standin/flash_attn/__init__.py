"""attn-doctor's stand-in for the `flash_attn` package (tools/parity/README.md).

It has the public surface transformers imports, records every call in `_recorder.CALLS`
and computes attention only when asked to (`_recorder.COMPUTE`). Its version is whatever
the generated dist-info beside it says (`importlib.metadata.version("flash_attn")`), so one
source tree stands in for any flash-attn release.
"""

import importlib.metadata

__version__ = importlib.metadata.version("flash_attn")

from .flash_attn_interface import (  # noqa: E402
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)
