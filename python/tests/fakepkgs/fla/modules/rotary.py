class RotaryEmbedding:
    """FLA's rotary module contract: grows its cos/sin table to max_seqlen; without cu_seqlens
    a table shorter than q's T fails its host assert; a `dim` wider than the head writes past
    it (here: raises, as the real kernel faults)."""

    def __init__(self, dim, base=10000.0, interleaved=False):
        self.dim, self.base, self.interleaved = dim, float(base), interleaved
        self._seq_len_cached = 0

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, q, k, seqlen_offset=0, cu_seqlens=None, max_seqlen=None):
        need = max_seqlen if max_seqlen is not None else q.shape[1] + (
            seqlen_offset if isinstance(seqlen_offset, int) else 0)
        self._seq_len_cached = max(self._seq_len_cached, need)
        if cu_seqlens is None and self._seq_len_cached < q.shape[1]:
            # every release's host assert without cu_seqlens (this text from 0.3.0 on)
            raise AssertionError(f"TR must be >= T, got {self._seq_len_cached} and {q.shape[1]}")
        if self.dim > q.shape[-1]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return q, k
