"""The oracle's stand-in for the `flash_attn` package (tools/oracle/README.md).

transformers imports flash-attn's public surface; flash-attn itself is not installable on the
oracle's device (no network, no matching wheel), so this package provides that surface and
hands every attention call to PyTorch's bundled FA2 kernels unchanged
(`flash_attn_interface.py`). `bert_padding` (and its call log `_recorder`) are the parity
harness's own reimplementation of flash-attn's `bert_padding.py` (tools/parity/standin): the
package path is extended with that folder, so the oracle reuses it rather than copying it.
The real release's `ops/triton/rotary.py` and `layers/rotary.py` are loaded into
`flash_attn.ops.triton.rotary` / `flash_attn.layers.rotary` by tools/oracle/stack.py when a
batch names flash-attn's rotary. The version is the generated dist-info's (the batch's
`environment.flash_attn`).
"""

import importlib.metadata
import os

__version__ = importlib.metadata.version("flash_attn")

_PARITY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "parity", "standin", "flash_attn")
__path__.append(os.path.normpath(_PARITY))  # noqa: F821 (package __path__)

from .flash_attn_interface import (  # noqa: E402
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)
