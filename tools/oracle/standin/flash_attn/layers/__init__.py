# flash_attn.layers: the parity stand-in's layers (tools/parity/standin/flash_attn/layers) answer
# imports such as transformers' `from flash_attn.layers.rotary import apply_rotary_emb`; a batch
# that names flash-attn's rotary gets the release's real layers/rotary.py (tools/oracle/stack.py).
import os

__path__.append(os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",  # noqa: F821
                                              "parity", "standin", "flash_attn", "layers")))
