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


class _Module:
    """torch.nn.Module's stand-in: calling a model runs its forward (the real __call__ lives on
    nn.Module, not on PreTrainedModel)."""

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class PreTrainedModel(_Module):
    pass


class FakeDecoderModel(PreTrainedModel):
    """A two-layer decoder of the masking_utils era (transformers >= 4.53): the model casts a 2-D
    mask to bool and hands on None when every entry is True (create_causal_mask for
    flash_attention_2), then every layer's attention gets that mask and cache_position[None]."""

    def __init__(self, config):
        self.config = config
        self.layers = [FakeAttention(config, 0), FakeAttention(config, 1)]

    def forward(self, input_ids=None, attention_mask=None, position_ids=None):
        from faketensor import FakeTensor
        b, s = input_ids.shape
        mask = None
        if attention_mask is not None:
            flat = [1 if v else 0 for row in attention_mask.tolist() for v in row]
            if not all(flat):
                mask = FakeTensor([flat[i * s:(i + 1) * s] for i in range(b)], dtype="bool",
                                  device=attention_mask.device)
        if position_ids is None:
            position_ids = FakeTensor([list(range(s))], device=input_ids.device)
        q = FakeTensor(shape=(b, 8, s, 32), dtype="bfloat16", device=input_ids.device)
        k = FakeTensor(shape=(b, 2, s, 32), dtype="bfloat16", device=input_ids.device)
        return [layer(q, k, k, mask, position_ids=position_ids) for layer in self.layers]


class FakeCausalLM(PreTrainedModel):
    """The task model around it: its forward calls the inner model (two model entries)."""

    def __init__(self, config):
        self.config = config
        self.model = FakeDecoderModel(config)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)
