#!/usr/bin/env python3
"""The guard on a GPU: does it stop a real device-side assert, and what does it cost a
training step? Run by bench/gpu/guard_gpu.sh (which builds and installs the package first).

Part A, a real crash. A tiny randomly initialised Llama on transformers' flash_attention_2
path, over the stand-in `flash_attn` in guard_standin/ (it forwards every call, unchecked, to
PyTorch's bundled FA2 kernel). Its first attention layer is called with a (B, L + 16)
padding mask for L keys: transformers unpads with indices past the B x L key rows, and the
gather faults on the device. Three runs:
  1. a child process without the guard: the real error (exit status, exception, the
     device assert's text);
  2. a child process under `python -m attn_doctor.guard -- python guard_gpu.py --child`:
     attn_doctor.VarlenError instead;
  3. in this process under `with attn_doctor.guard()`: VarlenError with its report, and the
     CUDA context still usable afterwards (the kernel never ran).
Part B, the cost. Training steps (forward, backward, AdamW) of a small Llama (8 layers,
hidden 1024) on two batches a data loader hands over anew each step: padded (B = 8,
L = 1024, a padding mask) and packed (one row of 8192 tokens, position ids restarting per
sequence). Blocks of steps alternate guard off / guard on / guard on without device reads,
each block timed between two synchronisations; the median step time per mode and the
slowdown are reported. Part C: bench/guard/guard_overhead.py per call with CUDA tensors.

    python bench/gpu/guard_gpu.py [--out DIR] [--quick]

Writes DIR/guard-gpu.json and DIR/guard-gpu.md ($OUT, else bench/results/local). Exit
status 0 when part A behaved as described (the crash is real without the guard and a
VarlenError with it), 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
STANDIN = os.path.join(HERE, "guard_standin")
# the stand-in first on sys.path before transformers is imported: transformers reads the
# installed distributions (flash-attn's dist-info) at import
sys.path.insert(0, STANDIN)

import torch  # noqa: E402
import transformers  # noqa: E402

import attn_doctor  # noqa: E402

DTYPE = torch.bfloat16
EXTRA_MASK_COLUMNS = 16


def build_llama(layers, hidden, heads, vocab, intermediate, seed=0):
    from transformers import AutoModelForCausalLM, LlamaConfig
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                      max_position_embeddings=16384)
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="flash_attention_2", dtype=DTYPE)
    except TypeError:  # releases that call it torch_dtype
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="flash_attention_2", torch_dtype=DTYPE)
    model = model.to("cuda")
    impl = model.config._attn_implementation
    if impl != "flash_attention_2":
        raise SystemExit(f"transformers chose {impl!r}, not flash_attention_2: the stand-in was not accepted")
    return model


# -- part A ---------------------------------------------------------------------------------

def crash_call(model):
    """Layer 0's attention with a padding mask wider than its keys (as a caller that drives
    the layers itself passes it; the model's own mask preparation slices the mask)."""
    b, length = 2, 64
    g = torch.Generator(device="cuda").manual_seed(1)
    hidden = torch.randn(b, length, model.config.hidden_size, device="cuda", dtype=DTYPE, generator=g)
    positions = torch.arange(length, device="cuda").expand(b, length)
    cos, sin = model.model.rotary_emb(hidden, positions)
    mask = torch.ones(b, length + EXTRA_MASK_COLUMNS, dtype=torch.long, device="cuda")
    mask[1, :8] = 0  # a left-padded second row
    out = model.model.layers[0].self_attn(hidden_states=hidden, position_embeddings=(cos, sin), attention_mask=mask)
    torch.cuda.synchronize()
    return out


def child_main():
    model = build_llama(2, 256, 4, 1024, 512)
    crash_call(model)
    print("CHILD: the call returned without an error")
    return 0


def run_child(guarded, launch_blocking):
    env = dict(os.environ)
    env.pop("CUDA_LAUNCH_BLOCKING", None)
    if launch_blocking:
        env["CUDA_LAUNCH_BLOCKING"] = "1"
    cmd = [sys.executable, os.path.abspath(__file__), "--child"]
    if guarded:
        cmd = [sys.executable, "-m", "attn_doctor.guard", "--"] + cmd
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    exception = next((line for line in reversed(lines) if not line.startswith(" ") and ":" in line
                      and ("Error" in line.split(":")[0] or "Exception" in line.split(":")[0])), "")
    asserts = [line.strip() for line in lines if "Assertion" in line or "device-side assert" in line]
    return {"command": " ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd)),
            "CUDA_LAUNCH_BLOCKING": launch_blocking, "exit_status": proc.returncode,
            "exception": exception, "device_assert_lines": asserts[:3], "seconds": round(time.time() - t0, 1),
            "stdout_tail": proc.stdout[-1500:], "stderr_tail": proc.stderr[-4000:]}


def part_a():
    result = {"unguarded": run_child(False, False), "unguarded_launch_blocking": run_child(False, True),
              "guarded_child": run_child(True, False)}
    model = build_llama(2, 256, 4, 1024, 512)
    inproc = {}
    with attn_doctor.guard() as guard:
        try:
            crash_call(model)
            inproc["raised"] = None
        except attn_doctor.VarlenError as err:
            inproc["raised"] = "VarlenError"
            inproc["message"] = str(err)
            inproc["first_violation"] = err.id
            inproc["violations"] = [v["id"] for v in err.report.get("violations", [])]
            inproc["prediction"] = err.prediction
            inproc["entry"] = err.entry
        except Exception as exc:  # the guard did not stop it
            inproc["raised"] = f"{type(exc).__name__}: {exc}"
        inproc["guard_stats"] = dict(guard.stats)
    try:
        inproc["cuda_usable_after"] = float(torch.ones(4, device="cuda").sum().item()) == 4.0
    except Exception as exc:
        inproc["cuda_usable_after"] = f"no: {exc}"
    result["guarded_in_process"] = inproc
    u, g = result["unguarded"], result["guarded_child"]
    result["as_expected"] = bool(
        u["exit_status"] != 0 and (u["device_assert_lines"] or "CUDA error" in u["stderr_tail"])
        and g["exit_status"] != 0 and "VarlenError" in g["stderr_tail"]
        and inproc.get("raised") == "VarlenError" and inproc.get("cuda_usable_after") is True)
    return result


# -- part B ---------------------------------------------------------------------------------

def make_batches(kind, n, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        if kind == "padded":
            b, length = 8, 1024
            ids = torch.randint(0, vocab, (b, length), generator=g)
            lengths = torch.randint(length // 2, length + 1, (b,), generator=g)
            mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
            labels = ids.masked_fill(mask == 0, -100)
            out.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
        else:
            total = 8192
            ids = torch.randint(0, vocab, (1, total), generator=g)
            pos, left = [], total
            while left > 0:
                n_tok = min(left, int(torch.randint(256, 1025, (1,), generator=g)))
                pos.append(torch.arange(n_tok))
                left -= n_tok
            out.append({"input_ids": ids, "position_ids": torch.cat(pos).view(1, -1), "labels": ids.clone()})
    return out


def part_b(quick):
    vocab = 16384
    model = build_llama(8, 1024, 16, vocab, 2816)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rounds, block = (2, 5) if quick else (5, 12)
    modes = {"off": None, "on": {}, "on, no sync": {"sync": False}}
    results = {}
    for kind in ("padded", "packed"):
        host_batches = make_batches(kind, block, vocab, seed=7)
        times = {m: [] for m in modes}
        stats = {}

        def block_of_steps():
            # the data loader's work (a fresh device copy per step) is inside the timed block
            # in every mode alike
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for batch in host_batches:
                dev = {k: v.to("cuda", non_blocking=True) for k, v in batch.items()}
                loss = model(**dev).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            return (time.perf_counter() - t0) / len(host_batches)

        block_of_steps()  # warm-up (kernels, allocator)
        for _ in range(rounds):
            for mode, options in modes.items():
                if options is None:
                    times[mode].append(block_of_steps())
                else:
                    with attn_doctor.guard(**options) as guard:
                        times[mode].append(block_of_steps())
                    stats[mode] = dict(guard.stats)
        base = statistics.median(times["off"])
        results[kind] = {
            "step_ms": {m: round(1e3 * statistics.median(t), 2) for m, t in times.items()},
            "blocks_ms": {m: [round(1e3 * x, 2) for x in t] for m, t in times.items()},
            "slowdown_percent": {m: round(100 * (statistics.median(t) / base - 1), 2) for m, t in times.items() if m != "off"},
            "guard_stats_last_block": stats,
        }
        print(f"part B {kind}: " + json.dumps(results[kind]["step_ms"]) + " slowdown % "
              + json.dumps(results[kind]["slowdown_percent"]), flush=True)
    results["model"] = {"layers": 8, "hidden": 1024, "heads": 16, "head_dim": 64, "vocab": vocab, "dtype": "bf16"}
    results["method"] = (f"{rounds} rounds x 3 modes, each a block of {block} training steps (fresh batches "
                         "copied to the device, forward, backward, AdamW) between two synchronisations; "
                         "median of the blocks' per-step times")
    return results


# -- part C ---------------------------------------------------------------------------------

def part_c(out, quick):
    cmd = [sys.executable, os.path.join(REPO, "bench", "guard", "guard_overhead.py"), "--device", "cuda",
           "--calls", "200" if quick else "1000", "--batches", "1,8,64", "--tokens", "4096,131072", "--out", out]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    return {"command": " ".join(cmd[1:]), "exit_status": proc.returncode, "stdout": proc.stdout[-6000:],
            "stderr": proc.stderr[-2000:]}


def environment():
    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": transformers.__version__, "python": platform.python_version(),
            "attn_doctor": attn_doctor.__version__, "flash_attn": "stand-in 2.8.3 over torch.ops.aten._flash_attention_forward",
            "date": time.strftime("%Y-%m-%d %H:%M")}


def markdown(r):
    a, b = r["part_a"], r.get("part_b", {})
    lines = [f"# The guard on a GPU ({r['environment']['gpu']})", "",
             f"torch {r['environment']['torch']}, transformers {r['environment']['transformers']}, "
             f"attn_doctor {r['environment']['attn_doctor']}, {r['environment']['flash_attn']}; "
             f"{r['environment']['date']}. Command: `{r['command']}`.", "",
             "## A real device-side assert, and the guard", "",
             "| run | exit | what was raised |", "|---|---|---|"]
    for key in ("unguarded", "unguarded_launch_blocking", "guarded_child"):
        x = a[key]
        what = x["exception"] or "(none)"
        if x["device_assert_lines"]:
            what += "<br>" + x["device_assert_lines"][0]
        lines.append(f"| {key.replace('_', ' ')} | {x['exit_status']} | {what} |")
    ip = a["guarded_in_process"]
    lines += ["", f"In process under `attn_doctor.guard()`: raised {ip.get('raised')}, first violation "
              f"`{ip.get('first_violation')}` (all: {', '.join(ip.get('violations', []))}); CUDA usable afterwards: "
              f"{ip.get('cuda_usable_after')}.", "", "```", ip.get("message", ""), "```", ""]
    if b:
        lines += ["## Cost in a training step", "", b["method"], "",
                  "| batch | off (ms/step) | on | slowdown | on, no sync | slowdown |", "|---|---|---|---|---|---|"]
        for kind in ("padded", "packed"):
            s, d = b[kind]["step_ms"], b[kind]["slowdown_percent"]
            lines.append(f"| {kind} | {s['off']} | {s['on']} | {d['on']} % | {s['on, no sync']} | {d['on, no sync']} % |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", os.path.join(REPO, "bench", "results", "local")))
    parser.add_argument("--quick", action="store_true", help="fewer steps and calls")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip-b", action="store_true", help="part A only")
    args = parser.parse_args()
    if args.child:
        return child_main()
    if not torch.cuda.is_available():
        print("guard_gpu: no CUDA device", file=sys.stderr)
        return 3
    os.makedirs(args.out, exist_ok=True)
    r = {"command": "python bench/gpu/guard_gpu.py" + (" --quick" if args.quick else ""), "environment": environment()}
    r["part_a"] = part_a()
    print("part A as expected:", r["part_a"]["as_expected"], flush=True)
    print(json.dumps({k: {kk: v.get(kk) for kk in ("exit_status", "exception", "device_assert_lines")}
                      for k, v in r["part_a"].items() if isinstance(v, dict) and "exit_status" in v}, indent=1))
    print(json.dumps(r["part_a"]["guarded_in_process"], indent=1, default=str)[:3000], flush=True)
    if not args.skip_b:
        r["part_b"] = part_b(args.quick)
        r["part_c"] = part_c(args.out, args.quick)
        print(r["part_c"]["stdout"], flush=True)
    with open(os.path.join(args.out, "guard-gpu.json"), "w") as fh:
        json.dump(r, fh, indent=1, default=str)
    with open(os.path.join(args.out, "guard-gpu.md"), "w") as fh:
        fh.write(markdown(r))
    print(f"wrote {args.out}/guard-gpu.json and guard-gpu.md")
    return 0 if r["part_a"]["as_expected"] else 1


if __name__ == "__main__":
    sys.exit(main())
