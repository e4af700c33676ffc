"""Stand-ins for `torch.nn.attention.varlen` with the signatures of torch 2.10 and 2.11
(torch/nn/attention/varlen.py of each release's wheel), and a `torch` module that says
which release and GPU it is. A test puts them in sys.modules under the real names."""
import types

from faketensor import FakeTensor

CALLS = []


def _run(query, cu_seq_q):
    CALLS.append(("varlen_attn", query.shape))
    if cu_seq_q.tolist()[-1] > query.shape[0]:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    return FakeTensor(shape=query.shape, dtype=query.dtype.name, device=query.device)


def varlen_attn_2_10(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False, return_aux=None):
    return _run(query, cu_seq_q)


def varlen_attn_2_11(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                     window_size=(-1, -1)):
    return _run(query, cu_seq_q)


def modules(release, capability=(9, 0)):
    """(torch, torch.nn.attention.varlen) for `release` ("2.10.0" or "2.11.0")."""
    torch = types.ModuleType("torch")
    torch.__version__ = release + "+cu130"
    torch.is_grad_enabled = lambda: True
    torch.cuda = types.SimpleNamespace(get_device_capability=lambda device=None: capability)
    varlen = types.ModuleType("torch.nn.attention.varlen")
    varlen.varlen_attn = varlen_attn_2_10 if release.startswith("2.10") else varlen_attn_2_11
    return torch, varlen
