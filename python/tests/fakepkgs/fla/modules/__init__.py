from .rotary import RotaryEmbedding  # noqa: F401
