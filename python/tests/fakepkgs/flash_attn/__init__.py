"""Fake flash_attn: records calls, fails the way an out-of-range cu_seqlens fails."""
__version__ = "2.6.3"
from .flash_attn_interface import flash_attn_func, flash_attn_varlen_func  # noqa: F401
