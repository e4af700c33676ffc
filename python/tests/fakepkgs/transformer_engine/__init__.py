"""A stand-in for Transformer Engine: only what the hook tests need (tests/test_te_thd.py)."""
__version__ = "2.12.0"
