from faketensor import FakeTensor

# like transformers 5.x: flash_attn's functions are cached in module globals at first use
_flash_fn = None
_flash_varlen_fn = None


def _lazy_imports():
    global _flash_fn, _flash_varlen_fn
    if _flash_varlen_fn is None:
        from flash_attn import flash_attn_func, flash_attn_varlen_func
        _flash_fn, _flash_varlen_fn = flash_attn_func, flash_attn_varlen_func
    return _flash_fn, _flash_varlen_fn


def _cumulative(lengths):
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return cu


def _flash_attention_forward(query_states, key_states, value_states, attention_mask, query_length,
                             is_causal, dropout=0.0, position_ids=None, softmax_scale=None,
                             sliding_window=None, use_top_left_mask=False, softcap=None,
                             deterministic=None, cu_seq_lens_q=None, cu_seq_lens_k=None,
                             max_length_q=None, max_length_k=None, target_dtype=None,
                             attn_implementation=None, **kwargs):
    flash_fn, varlen_fn = _lazy_imports()
    b, lq, h, d = query_states.shape
    lk, hk = key_states.shape[1], key_states.shape[2]
    dt, dev = query_states.dtype.name, query_states.device
    extra = {"causal": is_causal}
    if sliding_window is not None and lk > sliding_window:
        extra["window_size"] = (sliding_window - 1, sliding_window - 1)
    if softcap is not None:
        extra["softcap"] = softcap
    if attention_mask is not None:
        rows = attention_mask.tolist()
        if len(rows[0]) > lk:
            # what the real gather does with a mask wider than the keys
            raise RuntimeError("CUDA error: device-side assert triggered (index out of bounds)")
        lengths = [sum(1 for x in r if x) for r in rows]
        cu_k = _cumulative(lengths)
        cu_q, max_q = (cu_k, max(lengths)) if query_length == lk else (list(range(b + 1)), 1)
        return varlen_fn(FakeTensor(shape=(cu_q[-1], h, d), dtype=dt, device=dev),
                         FakeTensor(shape=(cu_k[-1], hk, d), dtype=dt, device=dev),
                         FakeTensor(shape=(cu_k[-1], hk, d), dtype=dt, device=dev),
                         cu_seqlens_q=FakeTensor(cu_q, dtype="int32", device=dev),
                         cu_seqlens_k=FakeTensor(cu_k, dtype="int32", device=dev),
                         max_seqlen_q=max_q, max_seqlen_k=max(lengths), **extra)
    if cu_seq_lens_q is not None or (position_ids is not None and b == 1):
        if cu_seq_lens_q is None:
            flat = position_ids.tolist()[0]
            # 5.x: sequences restart at the smallest position id
            starts = [i for i, p in enumerate(flat) if p == min(flat)] + [len(flat)]
            cu_seq_lens_q = cu_seq_lens_k = FakeTensor(starts, dtype="int32", device=dev)
            max_length_q = max_length_k = FakeTensor(
                max(y - x for x, y in zip(starts, starts[1:])), shape=(), dtype="int64", device=dev)
        return varlen_fn(FakeTensor(shape=(b * lq, h, d), dtype=dt, device=dev),
                         FakeTensor(shape=(b * lk, hk, d), dtype=dt, device=dev),
                         FakeTensor(shape=(b * lk, hk, d), dtype=dt, device=dev),
                         cu_seqlens_q=cu_seq_lens_q, cu_seqlens_k=cu_seq_lens_k,
                         max_seqlen_q=max_length_q, max_seqlen_k=max_length_k, **extra)
    return flash_fn(query_states, key_states, value_states, **extra)
