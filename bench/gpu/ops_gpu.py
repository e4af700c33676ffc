"""attn_doctor.ops on a CUDA device: correctness against an fp32 reference, the three raise
policies on a broken call, a CUDA-graph capture, torch.compile(fullgraph=True) of a tiny Llama
on attn_implementation="attn_doctor", and the per-call cost of the op (readout polled or by
event, row counters on and off) against the same checked kernel without a readout, the
unchecked kernel, an empty Python custom op and torch's varlen_attn (flash-attn's FA2 too where
it is installed). Run by bench/gpu/ops_gpu.sh after it built the extension.
Also: the row counters folded by the readout kernel against the CPU twin's, the host path under
cProfile, and forward + backward per call. Writes ops-gpu.json and prints the tables."""
import argparse
import json
import math
import statistics
import sys
import time
from typing import Tuple

import torch

import attn_doctor
from attn_doctor import _cuda_ops, _native, ops
# the package tests' setup (python/ is on PYTHONPATH): the fp32 per-segment reference, the
# small Llama and the packed batch
from tests.test_ops import _packed, _reference as reference, _tiny_llama


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def correctness(results):
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        for D in ops.CUDA_HEAD_DIMS:
            for H, Hk in ((8, 8), (8, 2)):
                torch.manual_seed(D + H + Hk)
                lens = [37, 200, 5, 411, 128]
                cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
                T = sum(lens)
                q = torch.randn(T, H, D, dtype=dtype, device="cuda", requires_grad=True)
                k = torch.randn(T, Hk, D, dtype=dtype, device="cuda", requires_grad=True)
                v = torch.randn(T, Hk, D, dtype=dtype, device="cuda", requires_grad=True)
                out = ops.flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=True)
                ref_in = [t.detach().float().requires_grad_() for t in (q, k, v)]
                ref = reference(*ref_in, cu.cpu(), True)
                g = torch.randn_like(out)
                out.backward(g)
                ref.backward(g.float())
                torch.cuda.synchronize()
                ops.check()
                row = {"dtype": str(dtype).replace("torch.", ""), "head_dim": D, "heads": H, "kv_heads": Hk,
                       "out_rel": rel(out, ref), "dq_rel": rel(q.grad, ref_in[0].grad),
                       "dk_rel": rel(k.grad, ref_in[1].grad), "dv_rel": rel(v.grad, ref_in[2].grad)}
                row["ok"] = all(row[x] < 2e-2 for x in ("out_rel", "dq_rel", "dk_rel", "dv_rel"))
                rows.append(row)
    results["correctness"] = rows
    print("correctness:", sum(r["ok"] for r in rows), "of", len(rows), "within 2e-2 (relative L2, fp32 reference)")
    for r in rows:
        print("  ", r)


def broken(results):
    out = {}
    T, H, D = 64, 4, 64
    q = torch.randn(T, H, D, dtype=torch.bfloat16, device="cuda")
    good = torch.tensor([0, 30, 64], dtype=torch.int32, device="cuda")
    bad = torch.tensor([0, 30, 90], dtype=torch.int32, device="cuda")  # 26 rows past q
    for policy in ("call", "step", "sync"):
        ops.set_policy(policy)
        ops._reset()
        where = None
        try:
            ops.flash_attn_varlen_func(q, q, q, bad, bad, 60, 60, causal=True)
            where = "not at the call"
            ops.flash_attn_varlen_func(q, q, q, good, good, 34, 34, causal=True)
            torch.cuda.synchronize()
            ops.flash_attn_varlen_func(q, q, q, good, good, 34, 34, causal=True)
            where = "not at the next calls"
            ops.check()
            where = "never"
        except attn_doctor.VarlenError as err:
            out[policy] = {"raised": where or "at the call", "id": err.id, "kernel": err.kernel,
                           "batch_file": err.batch_file, "text": str(err)}
    ops.set_policy("step")
    results["policies"] = out
    for p, r in out.items():
        print(f"policy {p}: raised {r['raised']}: {r['id']}; {r['kernel'][:1]}")


def rows(results):
    """The row counters folded by the readout kernel: output rows no launch wrote (cu_seqlens_q
    ends 14 rows short of q) and rows two segments wrote (segment 2 starts 20 rows inside
    segment 0), through the CUDA launch and its readout against the CPU twin (which counts on
    the host): the summaries must be equal. Without counters (rows=False) the readout has none."""
    T, H, D = 64, 4, 64
    cases = {"unwritten": ([0, 30, 50], 30), "overwritten": ([0, 40, 20, 64], 44)}
    out = {}
    ops._reset()
    for name, (cu_list, mx) in cases.items():
        torch.manual_seed(0)
        q = torch.randn(T, H, D, dtype=torch.bfloat16)
        cu = torch.tensor(cu_list, dtype=torch.int32)
        o, l = torch.empty_like(q), torch.empty((H, T), dtype=torch.float32)
        cpu = _native.varlen_fwd_cpu(0, ops._tensor_arg(q), ops._tensor_arg(q), ops._tensor_arg(q),
                                     (cu.data_ptr(), cu.numel()), (cu.data_ptr(), cu.numel()), mx, mx,
                                     1 / math.sqrt(D), 0.0, False, -1, -1, o.data_ptr(), l.data_ptr())["rows"]
        row = {"cpu": cpu}
        qc, cuc = q.cuda(), cu.cuda()
        for counted in (True, False):
            oc, lc = torch.empty_like(qc), torch.empty((H, T), dtype=torch.float32, device="cuda")
            _cuda_ops.forward(qc, qc, qc, cuc, cuc, mx, mx, 1 / math.sqrt(D), False, -1, -1, 0.0, oc, lc, None,
                              rows=counted)
            read = _native.ops_drain(True)
            row["cuda" if counted else "cuda rows=False"] = read[1]["rows"] if read is not None else None
        row["agree"] = row["cuda"] == cpu and cpu["unwritten" if name == "unwritten" else "overwritten"] > 0 and \
            row["cuda rows=False"] in (None, {})
        out[name] = row
    results["rows"] = out
    for name, r in out.items():
        print(f"rows {name}: cuda {r['cuda']} cpu {r['cpu']} rows=False {r['cuda rows=False']} agree={r['agree']}")


def graphs(results):
    ops.set_policy("sync")
    ops._reset()
    T, H, D = 256, 8, 128
    q = torch.randn(T, H, D, dtype=torch.bfloat16, device="cuda")
    cu = torch.tensor([0, 100, 256], dtype=torch.int32, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            ops.flash_attn_varlen_func(q, q, q, cu, cu, 156, 156, causal=True)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    ops.check()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ops.flash_attn_varlen_func(q, q, q, cu, cu, 156, 156, causal=True)
    q.copy_(torch.randn_like(q))
    g.replay()
    torch.cuda.synchronize()
    ops.check()
    err_clean = rel(out, reference(q, q, q, cu.cpu(), True))
    # the same graph, then cu_seqlens edited in place to run past q: the replay's record says so
    cu.copy_(torch.tensor([0, 100, 300], dtype=torch.int32))
    g.replay()
    torch.cuda.synchronize()
    caught = None
    try:
        ops.check()
    except attn_doctor.VarlenError as err:
        caught = err.kernel
    ops._reset()
    ops.set_policy("step")
    results["cuda_graph"] = {"replay_rel_err": err_clean, "broken_replay_caught": caught}
    print("cuda graph: replay rel err", err_clean, "; broken replay:", caught)


def compiled(results):
    import attn_doctor.hf  # noqa: F401
    cfg = dict(vocab_size=512, hidden_size=512, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=8,
               num_key_value_heads=2, max_position_embeddings=4096)
    model = _tiny_llama("attn_doctor", torch.bfloat16, "cuda", **cfg)
    ref = _tiny_llama("sdpa", torch.bfloat16, "cuda", **cfg)
    ref.load_state_dict(model.state_dict())
    lens = [300, 700, 24]
    ids, pos = _packed(lens, 512, "cuda")
    cu = torch.tensor([0, 300, 1000, 1024], dtype=torch.int32, device="cuda")
    kw = dict(input_ids=ids, position_ids=pos, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=700, max_length_k=700)
    c = torch.compile(model, fullgraph=True)
    t0 = time.time()
    logits = c(**kw).logits
    loss = torch.nn.functional.cross_entropy(logits[0, :-1].float(), ids[0, 1:])
    loss.backward()
    torch.cuda.synchronize()
    compile_s = time.time() - t0
    ops.check()
    # sdpa on each sequence alone
    parts, s = [], 0
    for n in lens:
        parts.append(ref(input_ids=ids[:, s:s + n]).logits)
        s += n
    ref_logits = torch.cat(parts, 1)
    results["compile"] = {"fullgraph": True, "first_step_s": compile_s, "logits_rel_err": rel(logits, ref_logits),
                          "loss": loss.item()}
    print("torch.compile fullgraph:", results["compile"])


@torch.library.custom_op("attn_doctor_bench::empty_op", mutates_args=())
def _empty_op(q: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """What torch.library's dispatch of a Python custom op costs with an empty body (the
    outputs allocated, nothing launched): the floor of any op written this way."""
    return torch.empty_like(q), torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)


@_empty_op.register_fake
def _(q):
    return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


def timing(results, iters=200):
    rows = []
    # tiny: a kernel of a few microseconds, so that every row shows the host path's cost
    shapes = [("tiny", [64] * 2, 2, 2, 64), ("small", [512] * 4, 16, 16, 128), ("medium", [2048] * 8, 16, 16, 128),
              ("d64", [1024] * 8, 16, 16, 64)]
    try:
        from flash_attn import flash_attn_varlen_func as fa2
        results["flash_attn"] = __import__("flash_attn").__version__
    except Exception as exc:  # not installed on the machine: torch's varlen_attn is its FA2
        fa2 = None
        results["flash_attn"] = f"not importable: {exc!r}"[:200]
    for name, lens, H, Hk, D in shapes:
        T = sum(lens)
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
        q = torch.randn(T, H, D, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(T, Hk, D, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(T, Hk, D, dtype=torch.bfloat16, device="cuda")
        out = torch.empty_like(q)
        lse = torch.empty((H, T), dtype=torch.float32, device="cuda")
        rec = torch.frombuffer(bytearray(_native.empty_record()), dtype=torch.uint8).to("cuda")
        stream = torch.cuda.current_stream()
        arg = _cuda_ops._arg
        mx = max(lens)
        scale = 1 / math.sqrt(D)

        def bare(checked):
            return lambda: _native.varlen_fwd_cuda(0, arg(q), arg(k), arg(v), cu.data_ptr(), cu.data_ptr(),
                                                   len(lens), mx, mx, scale, 0.0, True, -1, -1, out.data_ptr(),
                                                   lse.data_ptr(), rec.data_ptr(), stream.cuda_stream, checked)

        def op(mode, counted):
            def setup():
                _cuda_ops.set_readout(mode)
                ops.set_policy("step", rows=counted)
            return setup, lambda: ops.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=True)

        variants = [("unchecked kernel (no record)", bare(False)), ("checked kernel, record not read", bare(True)),
                    ("custom op, empty body", lambda: _empty_op(q)),
                    ("op, poll, rows=True", op("poll", True)), ("op, poll, rows=False", op("poll", False)),
                    ("op, event, rows=True", op("event", True)), ("op, event, rows=False", op("event", False))]
        if fa2 is not None:
            variants.append(("flash_attn.flash_attn_varlen_func (FA2)",
                             lambda: fa2(q, k, v, cu, cu, mx, mx, causal=True)))
        try:
            from torch.nn.attention.varlen import varlen_attn
            variants.append(("torch varlen_attn (FA2)", lambda: varlen_attn(q, k, v, cu, cu, mx, mx,
                                                                            window_size=(-1, 0))))
        except Exception:
            pass
        for label, fn in variants:
            if isinstance(fn, tuple):
                fn[0]()
                fn = fn[1]
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
            ops.check()
            dev, wall = [], []
            for _ in range(5):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                a.record()
                for _ in range(iters):
                    fn()
                b.record()
                b.synchronize()
                wall.append((time.perf_counter() - t0) / iters * 1e6)
                dev.append(a.elapsed_time(b) / iters * 1e3)
                ops.check()
            rows.append({"shape": name, "tokens": T, "heads": H, "head_dim": D, "variant": label,
                         "us_per_call_stream": statistics.median(dev), "us_per_call_wall": statistics.median(wall),
                         "spread_stream": max(dev) - min(dev)})
    _cuda_ops.set_readout("poll")
    ops.set_policy("step", rows=True)
    results["timing"] = rows
    print(f"{'shape':8} {'variant':34} {'us/call (stream)':>17} {'us/call (host)':>15}")
    for r in rows:
        print(f"{r['shape']:8} {r['variant']:34} {r['us_per_call_stream']:17.1f} {r['us_per_call_wall']:15.1f}")


def host_profile(results, calls=2000):
    """Where the op's host path goes: cProfile over `calls` forward calls at the tiny shape
    (host-bound), the functions with the most time of their own (builtins such as torch.empty
    and the extension's launch included)."""
    import cProfile
    import io
    import pstats
    lens, H, D = [64] * 2, 2, 64
    T = sum(lens)
    cu = torch.tensor([0, 64, 128], dtype=torch.int32, device="cuda")
    q = torch.randn(T, H, D, dtype=torch.bfloat16, device="cuda")
    out = {}
    for counted in (True, False):
        ops.set_policy("step", rows=counted)
        for _ in range(50):
            ops.flash_attn_varlen_func(q, q, q, cu, cu, 64, 64, causal=True)
        torch.cuda.synchronize()
        ops.check()
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        for _ in range(calls):
            ops.flash_attn_varlen_func(q, q, q, cu, cu, 64, 64, causal=True)
        prof.disable()
        wall = (time.perf_counter() - t0) / calls * 1e6
        torch.cuda.synchronize()
        ops.check()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
        out[f"rows={counted}"] = {"us_per_call_profiled": wall, "top": text.getvalue().splitlines()}
    ops.set_policy("step", rows=True)
    results["host_profile"] = out
    for key, r in out.items():
        print(f"host profile {key}: {r['us_per_call_profiled']:.1f} us per call under cProfile")
        print("\n".join(r["top"][-24:]))


def backward_timing(results, iters=100):
    """Forward + backward through autograd of the op against varlen_attn's, per call."""
    rows = []
    for name, lens, H, D in (("small", [512] * 4, 16, 128), ("medium", [2048] * 8, 16, 128)):
        T = sum(lens)
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
        q, k, v = (torch.randn(T, H, D, dtype=torch.bfloat16, device="cuda", requires_grad=True) for _ in range(3))
        g = torch.randn(T, H, D, dtype=torch.bfloat16, device="cuda")
        mx = max(lens)
        variants = []
        for counted in (True, False):
            def f(counted=counted):
                ops.set_policy("step", rows=counted)
                ops.flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=True).backward(g)
            variants.append((f"op fwd+bwd, poll, rows={counted}", f))
        try:
            from torch.nn.attention.varlen import varlen_attn
            variants.append(("torch varlen_attn (FA2) fwd+bwd",
                             lambda: varlen_attn(q, k, v, cu, cu, mx, mx, window_size=(-1, 0)).backward(g)))
        except Exception:
            pass
        for label, fn in variants:
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            ops.check()
            dev = []
            for _ in range(3):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(iters):
                    fn()
                b.record()
                b.synchronize()
                dev.append(a.elapsed_time(b) / iters * 1e3)
                ops.check()
            rows.append({"shape": name, "tokens": T, "variant": label, "us_per_call_stream": statistics.median(dev)})
    ops.set_policy("step", rows=True)
    results["backward_timing"] = rows
    for r in rows:
        print(f"{r['shape']:8} {r['variant']:34} {r['us_per_call_stream']:10.1f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "cuda_backend_built": _native.cuda_backend_built}
    try:
        import transformers
        results["transformers"] = transformers.__version__
    except ImportError:
        pass
    print(results)
    status = 0
    for step in (correctness, broken, rows, graphs, compiled, timing, host_profile, backward_timing):
        try:
            step(results)
        except Exception as exc:
            import traceback
            traceback.print_exc()
            results.setdefault("failed", []).append(f"{step.__name__}: {exc!r}")
            status = 1
        with open(f"{args.out}/ops-gpu.json", "w") as fh:
            json.dump(results, fh, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
