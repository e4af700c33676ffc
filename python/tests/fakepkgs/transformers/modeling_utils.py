from .integrations.flash_attention import flash_attention_forward


class AttentionInterface:
    _global_mapping = {"flash_attention_2": flash_attention_forward}

    def get_interface(self, name, default):
        return self._global_mapping.get(name, default)


ALL_ATTENTION_FUNCTIONS = AttentionInterface()


class FakeConfig:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FakeAttention:
    """A model's attention layer calling through ALL_ATTENTION_FUNCTIONS, as 5.x models do."""

    def __init__(self, config, layer_idx, sliding_window=None, softcap=None):
        self.config, self.layer_idx, self.is_causal = config, layer_idx, True
        self.sliding_window, self.softcap = sliding_window, softcap

    def __call__(self, query, key, value, attention_mask, **kwargs):
        fn = ALL_ATTENTION_FUNCTIONS.get_interface("flash_attention_2", None)
        return fn(self, query, key, value, attention_mask, sliding_window=self.sliding_window,
                  softcap=self.softcap, **kwargs)
