"""A 1B-class Llama training step on attn_implementation="attn_doctor" against the same step on
the fastest attention the machine has.

The model is TinyLlama-1.1B's shape (transformers' LlamaConfig: hidden 2048, 22 layers, 32 heads
of 64, 4 key/value heads, intermediate 5632, vocab 32000; --head-dims 128 gives 16 heads of 128,
the same hidden size) with random weights in bf16, trained with AdamW (fused). A step is
zero_grad, forward with labels, backward, optimizer step, timed with CUDA events (the step
ends with a synchronisation, as a loop that logs its loss does); warm-up, then the median of
--repeats steps. Variants, per size (tokens per step):

  packed batch (batch 1, seeded random document lengths, the flash kwargs cu_seq_lens_q/k,
  max_length_q/k and restarting position ids, as DataCollatorWithFlattening writes them):
    attn_doctor     attn_implementation="attn_doctor" (python/attn_doctor/hf.py): the checked
                    kernels, ops.set_policy's defaults (raise_at="step", rows=True)
    torch_varlen    the same call through torch.nn.attention.varlen.varlen_attn (FA2 as torch
                    bundles it), registered here with transformers' AttentionInterface
  equal lengths (every document --equal-length tokens: the packed batch and its dense twin):
    attn_doctor / torch_varlen on the packed batch;
    sdpa            the dense (B, L) batch through SDPA, torch's default backend choice;
    sdpa_cudnn      the same with SDPA held to cuDNN attention (torch.nn.attention.sdpa_kernel).

The loss (forward + backward from the same weights, before any optimizer step at that size)
is compared across the variants of a batch. The attention's share of the step: the attention
function alone (forward + backward on tensors of one layer's shapes and layout) times the
layer count, over the step's median. --budget stops before a variant that would start past it
(the rest is listed as skipped); a variant that runs out of memory is recorded as such.

    python bench/gpu/train_step_gpu.py --out DIR [--sizes 8192,16384,32768] [--head-dims 64,128]
    python bench/gpu/train_step_gpu.py --device cpu --tiny --out DIR     # a smoke test, CPU twin
"""
import argparse
import gc
import inspect
import json
import math
import os
import statistics
import sys
import time

import torch

import attn_doctor.hf  # registers "attn_doctor"
from attn_doctor import ops

VARLEN = "torch_varlen"


def _varlen_causal():
    """torch's varlen_attn asks for causal as is_causal (2.10) or window_size=(-1, 0) (2.11 on)."""
    from torch.nn.attention.varlen import varlen_attn
    params = inspect.signature(varlen_attn).parameters
    return varlen_attn, ({"is_causal": True} if "is_causal" in params else {"window_size": (-1, 0)})


def varlen_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                             sliding_window=None, softcap=None, is_causal=None, **kwargs):
    """transformers' attention-function signature, the packed call only (the flash kwargs):
    torch's varlen_attn on the same (total, heads, dim) views attn_doctor's function passes."""
    varlen_attn, causal = _varlen_causal()
    B, H, S, D = query.shape
    q = query.transpose(1, 2).reshape(-1, H, D)
    k = key.transpose(1, 2).reshape(-1, key.shape[1], D)
    v = value.transpose(1, 2).reshape(-1, value.shape[1], D)
    out = varlen_attn(q, k, v, kwargs["cu_seq_lens_q"], kwargs["cu_seq_lens_k"], int(kwargs["max_length_q"]),
                      int(kwargs["max_length_k"]), scale=scaling, **causal)
    return out.view(B, S, H, D), None


def register_varlen():
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask
    AttentionInterface.register(VARLEN, varlen_attention_forward)
    AttentionMaskInterface.register(VARLEN, flash_attention_mask)


def config_for(head_dim, tiny):
    from transformers import LlamaConfig
    if tiny:  # the smoke test: the same code path, a model the CPU twin runs in seconds
        return LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4096 // head_dim // 16,
                           num_key_value_heads=2, head_dim=head_dim // 4, intermediate_size=128, vocab_size=256,
                           max_position_embeddings=4096, attention_dropout=0.0, use_cache=False)
    heads = 2048 // head_dim
    return LlamaConfig(hidden_size=2048, num_hidden_layers=22, num_attention_heads=heads, num_key_value_heads=4,
                       head_dim=head_dim, intermediate_size=5632, vocab_size=32000, max_position_embeddings=32768,
                       rms_norm_eps=1e-5, attention_dropout=0.0, use_cache=False)


def random_lengths(total, lo, hi, gen):
    """Document lengths drawn uniformly from [lo, hi] until they fill `total`; the last one cut
    to fit (at least 1 token)."""
    lengths = []
    while sum(lengths) < total:
        n = int(torch.randint(lo, hi + 1, (1,), generator=gen))
        lengths.append(min(n, total - sum(lengths)))
    return lengths


def packed_batch(lengths, vocab, device, gen):
    T = sum(lengths)
    ids = torch.randint(0, vocab, (1, T), generator=gen)
    labels = ids.clone()
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    # no loss across documents: the first token of each is not a target (the dense twin's rows
    # lose the same predictions to the shift)
    labels[0, cu[:-1]] = -100
    pos = torch.cat([torch.arange(n) for n in lengths])[None]
    cu_t = torch.tensor(cu, dtype=torch.int32, device=device)
    return {"input_ids": ids.to(device), "labels": labels.to(device), "position_ids": pos.to(device),
            "cu_seq_lens_q": cu_t, "cu_seq_lens_k": cu_t, "max_length_q": max(lengths),
            "max_length_k": max(lengths), "use_cache": False}


def dense_batch(packed, rows):
    ids = packed["input_ids"].view(rows, -1)
    labels = packed["labels"].view(rows, -1)
    return {"input_ids": ids, "labels": labels, "use_cache": False}


def set_impl(model, name):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(name)
    else:
        model.config._attn_implementation = name


class _Sdpa:
    def __init__(self, cudnn):
        self.cudnn = cudnn

    def __enter__(self):
        if self.cudnn:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            self.ctx = sdpa_kernel([SDPBackend.CUDNN_ATTENTION])
            self.ctx.__enter__()

    def __exit__(self, *exc):
        if self.cudnn:
            self.ctx.__exit__(*exc)


def impl_of(variant):
    return {"attn_doctor": "attn_doctor", "torch_varlen": VARLEN, "sdpa": "sdpa", "sdpa_cudnn": "sdpa"}[variant]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def step(model, opt, batch, variant, optimise=True):
    opt.zero_grad(set_to_none=True)
    with _Sdpa(variant == "sdpa_cudnn"):
        loss = model(**batch).loss
        loss.backward()
    if optimise:
        opt.step()
    return loss


def time_steps(model, opt, batch, variant, warmup, repeats, device):
    for _ in range(warmup):
        step(model, opt, batch, variant)
    sync(device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step(model, opt, batch, variant)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            step(model, opt, batch, variant)
            times.append((time.perf_counter() - t) * 1e3)
    if variant == "attn_doctor":
        ops.check()  # every record of the step read: a broken call would raise here
    return times


def layer_tensors(config, batch, variant, dense_rows, device):
    """q, k, v (leaves) and dout of one layer's attention, seeded, in the layout the model hands
    the attention function: (B, S, H, D), B the dense twin's rows for SDPA, else 1 (packed)."""
    H, Hk, D = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    T = batch["input_ids"].numel()
    B = dense_rows if variant.startswith("sdpa") else 1
    S = T // B
    g = torch.Generator(device="cpu").manual_seed(3)

    def leaf(h):
        t = torch.randn((B, S, h, D), generator=g).to(device=device, dtype=torch.bfloat16)
        return t.requires_grad_()
    q, k, v = leaf(H), leaf(Hk), leaf(Hk)
    dout = torch.randn((B, S, H, D), generator=g).to(device=device, dtype=torch.bfloat16)
    return q, k, v, dout


def layer_call(config, batch, variant, dense_rows, device):
    """(fwd, bwd): one layer's attention function on layer_tensors' tensors, as the model calls it
    (q/k/v projected as (B, S, H, D), viewed as (B, H, S, D)); fwd() returns the output, bwd(out)
    runs its backward and drops the gradients."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    H, Hk, D = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    q, k, v, dout = layer_tensors(config, batch, variant, dense_rows, device)

    class Module:
        is_causal = True
        training = True
        num_key_value_groups = H // Hk
    fn = ALL_ATTENTION_FUNCTIONS[impl_of(variant)]
    kwargs = {} if variant.startswith("sdpa") else {
        k2: batch[k2] for k2 in ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "position_ids")
        if k2 in batch}

    def fwd():
        with _Sdpa(variant == "sdpa_cudnn"):
            out, _ = fn(Module, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None, dropout=0.0,
                        scaling=1.0 / math.sqrt(D), **kwargs)
        return out

    def bwd(out):
        with _Sdpa(variant == "sdpa_cudnn"):
            out.backward(dout)
        q.grad = k.grad = v.grad = None
    return fwd, bwd


def attention_alone(config, batch, variant, dense_rows, repeats, device):
    """The attention function of one layer, forward + backward (layer_call); ms per layer."""
    fwd, bwd = layer_call(config, batch, variant, dense_rows, device)

    def once():
        bwd(fwd())
    for _ in range(2):
        once()
    sync(device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            once()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            once()
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def free(device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def profile_step(model, opt, batch, variant, path, device):
    """One step under torch.profiler: the top operators by device and by host time."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        step(model, opt, batch, variant)
        sync(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    with open(path, "w") as f:
        f.write(f"# {variant}: one step, by device time\n")
        f.write(prof.key_averages().table(sort_by=key, row_limit=30))
        f.write(f"\n# {variant}: one step, by host time\n")
        f.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="bench/results/local")
    p.add_argument("--device", default="cuda")
    p.add_argument("--sizes", default="8192,16384,32768")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--order", default="", help="head_dim:size,... to run first (the rest after, in order)")
    p.add_argument("--variants", default="attn_doctor,torch_varlen,sdpa,sdpa_cudnn")
    p.add_argument("--equal-length", type=int, default=2048)
    p.add_argument("--doc-min", type=int, default=128)
    p.add_argument("--doc-max", type=int, default=4096)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget", type=float, default=1e9, help="seconds: no variant starts past this")
    p.add_argument("--profile", default="", help="head_dim:size to profile one step of attn_doctor and torch_varlen")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    device = torch.device(a.device)
    from transformers import LlamaForCausalLM
    import transformers
    if device.type == "cuda":
        register_varlen()
    variants = [v for v in a.variants.split(",") if v]
    if device.type != "cuda":
        variants = [v for v in variants if v in ("attn_doctor", "sdpa")]
    sizes = [int(x) for x in a.sizes.split(",")]
    dims = [int(x) for x in a.head_dims.split(",")]
    plan = [(d, s) for d in dims for s in sizes]
    first = [tuple(int(y) for y in x.split(":")) for x in a.order.split(",") if x]
    plan = [x for x in first if x in plan] + [x for x in plan if x not in first]
    env = {"torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.version.cuda,
           "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
           "policy": ops.policy(), "rows": ops._policy["rows"], "argv": sys.argv[1:]}
    if device.type == "cuda":
        env["sdpa_backends_enabled"] = {"flash": torch.backends.cuda.flash_sdp_enabled(),
                                        "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                                        "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled()}
    results = {"env": env, "runs": [], "skipped": []}

    def save():
        with open(os.path.join(a.out, "train-step.json"), "w") as f:
            json.dump(results, f, indent=1)

    model = opt = None
    current = None
    for head_dim, size in plan:
        if time.time() - t0 > a.budget:
            results["skipped"].append({"head_dim": head_dim, "tokens": size, "why": "budget"})
            continue
        if current != head_dim:
            model = opt = None
            free(device)
            torch.manual_seed(a.seed)
            config = config_for(head_dim, a.tiny)
            with torch.device(device):
                model = LlamaForCausalLM(config).to(torch.bfloat16)
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=device.type == "cuda")
            current = head_dim
            results.setdefault("models", {})[str(head_dim)] = {
                "parameters": sum(x.numel() for x in model.parameters()), "heads": config.num_attention_heads,
                "kv_heads": config.num_key_value_heads, "head_dim": config.head_dim, "layers": config.num_hidden_layers}
        T = size if not a.tiny else size // 64
        gen = torch.Generator().manual_seed(a.seed + size)
        lo, hi = (a.doc_min, a.doc_max) if not a.tiny else (4, 64)
        L = a.equal_length if not a.tiny else 32
        rand = packed_batch(random_lengths(T, lo, hi, gen), config.vocab_size, device, gen)
        equal = packed_batch([L] * (T // L), config.vocab_size, device, gen)
        rows = T // L
        jobs = [("random", v, rand) for v in variants if v in ("attn_doctor", "torch_varlen")]
        jobs += [("equal", v, equal if not v.startswith("sdpa") else dense_batch(equal, rows)) for v in variants]
        lengths = (rand["cu_seq_lens_q"][1:] - rand["cu_seq_lens_q"][:-1]).tolist()
        run = {"head_dim": head_dim, "tokens": T, "random_documents": len(lengths), "random_max": max(lengths),
               "equal_length": L, "equal_rows": rows, "variants": {}}
        results["runs"].append(run)
        # the loss of each variant from the same weights (no optimizer step yet)
        for batch_name, variant, batch in jobs:
            key = f"{batch_name}/{variant}"
            try:
                set_impl(model, impl_of(variant))
                loss = step(model, opt, batch, variant, optimise=False)
                gnorm = math.sqrt(sum(float(x.grad.float().pow(2).sum()) for x in model.parameters()
                                      if x.grad is not None))
                run["variants"][key] = {"loss": float(loss.detach()), "grad_norm": gnorm}
            except (torch.cuda.OutOfMemoryError, RuntimeError) as exc:
                oom = isinstance(exc, torch.cuda.OutOfMemoryError)
                run["variants"][key] = {"error": "out of memory" if oom else "failed",
                                        "detail": str(exc).split("\n")[0][:300]}
            opt.zero_grad(set_to_none=True)
            loss = None
            free(device)
        save()
        for batch_name, variant, batch in jobs:
            key = f"{batch_name}/{variant}"
            row = run["variants"][key]
            if "error" in row:
                continue
            if time.time() - t0 > a.budget:
                row["skipped"] = "budget"
                continue
            try:
                set_impl(model, impl_of(variant))
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                times = time_steps(model, opt, batch, variant, a.warmup, a.repeats, device)
                row["step_ms"] = times
                row["step_median_ms"] = statistics.median(times)
                if device.type == "cuda":
                    row["peak_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
                opt.zero_grad(set_to_none=True)
                free(device)
                per_layer = attention_alone(config, batch, variant, rows, a.repeats, device)
                row["attention_layer_ms"] = per_layer
                row["attention_share"] = per_layer * config.num_hidden_layers / row["step_median_ms"]
            except (torch.cuda.OutOfMemoryError, RuntimeError) as exc:
                row["error"] = "out of memory" if isinstance(exc, torch.cuda.OutOfMemoryError) else "failed"
                row["detail"] = str(exc).split("\n")[0][:300]
            opt.zero_grad(set_to_none=True)
            free(device)
            print(f"d{head_dim} {T:6d} {key:24s} loss {row.get('loss', float('nan')):.5f} "
                  f"step {row.get('step_median_ms', float('nan')):8.2f} ms  attention share "
                  f"{row.get('attention_share', float('nan')):.3f} {row.get('error', '')}", flush=True)
            save()
        if a.profile == f"{head_dim}:{size}" and time.time() - t0 < a.budget:
            for variant in ("attn_doctor", "torch_varlen"):
                if variant in variants:
                    set_impl(model, impl_of(variant))
                    profile_step(model, opt, rand, variant, os.path.join(a.out, f"profile-d{head_dim}-{T}-{variant}.txt"),
                                 device)
                    opt.zero_grad(set_to_none=True)
                    free(device)
    summarise(results)
    results["seconds"] = time.time() - t0
    save()


def summarise(results):
    """attn_doctor / the fastest other variant on the same batch, per size."""
    for run in results["runs"]:
        v = run["variants"]
        for batch_name in ("random", "equal"):
            mine = v.get(f"{batch_name}/attn_doctor", {}).get("step_median_ms")
            others = {k.split("/")[1]: x["step_median_ms"] for k, x in v.items()
                      if k.startswith(batch_name + "/") and "attn_doctor" not in k and "step_median_ms" in x}
            if mine is None or not others:
                continue
            best = min(others, key=others.get)
            losses = [x["loss"] for k, x in v.items() if k.startswith(batch_name + "/") and "loss" in x]
            run[f"{batch_name}_ratio"] = {"attn_doctor_ms": mine, "fastest": best, "fastest_ms": others[best],
                                          "ratio": mine / others[best],
                                          "loss_spread": max(losses) - min(losses) if losses else None}
            print(f"d{run['head_dim']} {run['tokens']:6d} {batch_name:6s}: attn_doctor {mine:.2f} ms, fastest "
                  f"{best} {others[best]:.2f} ms, ratio {mine / others[best]:.4f}")


if __name__ == "__main__":
    main()
