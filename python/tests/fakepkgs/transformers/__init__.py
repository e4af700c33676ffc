"""Fake transformers for attn_doctor's tests: the flash-attention entry points with the
real signatures and a pure-Python version of their mask/position-ids handling."""
__version__ = "5.17.0"
