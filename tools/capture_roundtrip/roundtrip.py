#!/usr/bin/env python3
"""Capture round trip: does a batch file captured from a real model call make
`attn-doctor check` report the varlen arguments the model actually passed?

For tiny randomly initialised Llama, Gemma-2 and Qwen2-VL models (built from configs, no
downloads) running with attn_implementation="flash_attention_2" on the installed
transformers release, and for three scenarios (a left-padded batch, a packed batch
described by position ids, and generate's prefill + decode steps), this script

  1. runs the model with attn_doctor's capture installed in "every call" mode, over the
     stand-in `flash_attn` package beside this file (it records the exact cu_seqlens /
     max_seqlen it receives and computes attention with PyTorch: the FA2 kernel bundled in
     PyTorch on CUDA, plain math elsewhere);
  2. runs `attn-doctor check --format json --full` on each captured batch file;
  3. compares the report's `varlen` block with what the stand-in recorded for that call:
     cu_seqlens_q/k, max_seqlen_q/k, whether max_seqlen was a 0-d tensor, and the path
     (varlen kernel vs the dense one).

It prints a table and, when $OUT is set, writes $OUT/capture_roundtrip.json and
$OUT/captures.tar.gz (the batch files). Exit status: 0 all compared rows match, 1 some
mismatch, 3 the attn-doctor binary is missing (unless --capture-only: then 0 once the
captures themselves worked).

On a machine without CUDA the models run on the CPU: transformers refuses FA2 there, so
imports and model construction run with CUDA pretended (see `cuda_pretended`); the code
path below the dispatch is the same.

    python3 tools/capture_roundtrip/roundtrip.py [--attn-doctor build/attn-doctor]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
STANDIN = os.path.join(HERE, "standin")

# The stand-in must be first on sys.path before transformers is imported: transformers
# reads the installed distributions (flash-attn's dist-info) once, at import.
sys.path.insert(0, STANDIN)
sys.path.insert(1, os.path.join(REPO, "python"))

import torch  # noqa: E402
import transformers  # noqa: E402

import attn_doctor  # noqa: E402
import flash_attn  # noqa: E402  (the stand-in)

MODELS = ("llama", "gemma2", "qwen2_vl")
SCENARIOS = ("padded-left", "packed", "generate")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attn-doctor", default=os.environ.get(
        "ATTN_DOCTOR", os.path.join(REPO, "build", "attn-doctor")),
        help="attn-doctor binary (default: build/attn-doctor, or $ATTN_DOCTOR)")
    p.add_argument("--captures", default=None,
                   help="folder for the captured batch files (default: a temporary folder)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--capture-only", action="store_true",
                   help="exit 0 without the attn-doctor step when the binary is missing")
    return p.parse_args()


# -- models --------------------------------------------------------------------------------

def build_config(name):
    common = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    if name == "llama":
        from transformers import LlamaConfig
        return LlamaConfig(**common)
    if name == "gemma2":
        from transformers import Gemma2Config
        # window 4 < the prompts' lengths, so sliding layers really slide; layers alternate
        return Gemma2Config(head_dim=16, sliding_window=4, query_pre_attn_scalar=16,
                            attn_logit_softcapping=50.0, final_logit_softcapping=30.0, **common)
    if name == "qwen2_vl":
        from transformers import Qwen2VLConfig
        text = dict(common, rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]})
        vision = dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2,
                      patch_size=14, spatial_merge_size=2, temporal_patch_size=2)
        return Qwen2VLConfig(text_config=text, vision_config=vision, vocab_size=128,
                             image_token_id=120, video_token_id=121, vision_start_token_id=122)
    raise ValueError(name)


def model_class(name):
    if name == "qwen2_vl":
        from transformers import Qwen2VLForConditionalGeneration
        return Qwen2VLForConditionalGeneration
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM


def all_configs(model):
    seen, out = set(), []
    for module in model.modules():
        for cfg in (getattr(module, "config", None),):
            if cfg is not None and id(cfg) not in seen:
                seen.add(id(cfg))
                out.append(cfg)
                for sub in ("text_config", "vision_config"):
                    sc = getattr(cfg, sub, None)
                    if sc is not None and id(sc) not in seen:
                        seen.add(id(sc))
                        out.append(sc)
    return out


@contextlib.contextmanager
def cuda_pretended(active):
    """CPU only. transformers refuses FA2 without an accelerator: every release when the
    model is built, and releases <= 4.47 also when their modules are imported (they import
    flash_attn's functions only if CUDA is available). Below that dispatch nothing depends
    on the device, so imports and construction run with torch.cuda.is_available() answering
    yes; the model itself stays on the CPU."""
    if not active:
        yield
        return
    real = torch.cuda.is_available
    torch.cuda.is_available = lambda: True
    try:
        yield
    finally:
        torch.cuda.is_available = real


def _construct(cls, cfg, dtype):
    build = cls.from_config if cls.__name__ == "AutoModelForCausalLM" else cls._from_config
    try:
        return build(cfg, attn_implementation="flash_attention_2", dtype=dtype)
    except TypeError:  # releases that call it torch_dtype
        return build(cfg, attn_implementation="flash_attention_2", torch_dtype=dtype)


def load_model(name, device, dtype):
    """(model, how FA2 was selected): "dispatch" through transformers' own checks (with CUDA
    pretended during construction on a CPU-only machine), "forced" where a config still had
    to be switched afterwards."""
    torch.manual_seed(0)
    with cuda_pretended(device == "cpu"):
        import transformers.modeling_flash_attention_utils as mfa
        cfg = build_config(name)
        model = _construct(model_class(name), cfg, dtype)
    model = model.to(device=device, dtype=dtype)
    how = "dispatch" if device == "cuda" else "dispatch (cpu)"
    if device == "cpu":
        # 5.x asks again at the first attention call (lazy import of flash_attn)
        mfa.is_flash_attn_2_available = lambda *a, **k: True
    for c in all_configs(model):
        if c._attn_implementation != "flash_attention_2":
            c._attn_implementation = "flash_attention_2"
            how = "forced"
    return model.eval(), how


# -- scenarios -----------------------------------------------------------------------------

def run_scenario(model, name, scenario, device):
    """Runs one scenario (the capture is active around it)."""
    g = torch.Generator().manual_seed(1)
    if scenario == "padded-left":
        ids = torch.randint(0, 100, (2, 8), generator=g).to(device)
        mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1], [1] * 8], device=device)
        model(input_ids=ids, attention_mask=mask)
    elif scenario == "packed":
        lengths = [4, 3, 5]
        ids = torch.randint(0, 100, (1, sum(lengths)), generator=g).to(device)
        pos = torch.cat([torch.arange(n) for n in lengths]).view(1, -1).to(device)
        if name == "qwen2_vl":
            # Qwen2-VL takes packed text positions prepended to the 3 mRoPE planes
            pos = pos.unsqueeze(0).expand(4, 1, -1)
        model(input_ids=ids, position_ids=pos)
    elif scenario == "generate":
        ids = torch.randint(0, 100, (2, 6), generator=g).to(device)
        mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1] * 6], device=device)
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=3, do_sample=False,
                       pad_token_id=0)
    else:
        raise ValueError(scenario)


# -- attn-doctor ---------------------------------------------------------------------------

def check(binary, path):
    proc = subprocess.run([binary, "check", "--format", "json", "--full", path],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode not in (0, 1):
        return None, f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
    try:
        return json.loads(proc.stdout), None
    except ValueError as exc:
        return None, f"unreadable report: {exc}"


def _value(v):
    return v["tensor"] if isinstance(v, dict) and "tensor" in v else v


def compare(actual, report):
    """Differences between what the kernel got and the report's varlen block."""
    varlen = report.get("varlen") or {}
    if actual["fn"] == "dense":
        return [] if varlen.get("path") == "dense" else [f"path {varlen.get('path')!r} != 'dense'"]
    diffs = []
    if varlen.get("path") == "dense":
        return ["report says dense, the model called the varlen kernel"]
    for key in ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"):
        if _value(varlen.get(key)) != actual.get(key):
            diffs.append(f"{key}: report {varlen.get(key)} != actual {actual.get(key)}")
    # one flag in the report; a release may pass an int for q and a tensor for k (5.12's
    # decode step does), and then the flag says nothing comparable
    same_kind = bool(actual.get("max_seqlen_q_is_tensor")) == bool(actual.get("max_seqlen_k_is_tensor"))
    if same_kind and "max_seqlen_is_tensor" in varlen and bool(varlen["max_seqlen_is_tensor"]) != bool(
            actual.get("max_seqlen_q_is_tensor")):
        diffs.append(f"max_seqlen_is_tensor: report {varlen['max_seqlen_is_tensor']} != actual "
                     f"{actual.get('max_seqlen_q_is_tensor')}")
    return diffs


def hook_agrees(actual, observed):
    """attn_doctor's own flash_attn hook saw what the stand-in saw (a self-check)."""
    if actual["fn"] == "dense":
        return not observed or observed[0]["entry"].endswith("flash_attn_func")
    if not observed:
        return False
    o = observed[0]
    return (o.get("cu_seqlens_q") == actual.get("cu_seqlens_q")
            and o.get("cu_seqlens_k") == actual.get("cu_seqlens_k")
            and _value(o.get("max_seqlen_q")) == actual.get("max_seqlen_q"))


# -- main ----------------------------------------------------------------------------------

def short(xs, n=8):
    if xs is None:
        return "-"
    if isinstance(xs, list) and len(xs) > n:
        return "[" + ",".join(map(str, xs[:n - 2])) + ",...," + str(xs[-1]) + "]"
    return json.dumps(xs, separators=(",", ""))[:40] if isinstance(xs, list) else str(xs)


def main():
    args = parse_args()
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    dtype = torch.bfloat16
    binary = args.attn_doctor if os.path.isfile(args.attn_doctor) and os.access(args.attn_doctor, os.X_OK) \
        else shutil.which(args.attn_doctor) if os.sep not in args.attn_doctor else None
    captures = args.captures or tempfile.mkdtemp(prefix="attn-doctor-roundtrip-")
    rows, problems = [], []
    started = time.time()
    for name in [m for m in args.models.split(",") if m]:
        model, how = load_model(name, device, dtype)
        for scenario in SCENARIOS:
            folder = os.path.join(captures, f"{name}-{scenario}")
            shutil.rmtree(folder, ignore_errors=True)
            first = len(flash_attn.CALLS)
            error = None
            with attn_doctor.capture(folder, every=True, announce=False):
                try:
                    with torch.no_grad():
                        run_scenario(model, name, scenario, device)
                except Exception as exc:  # a scenario this release cannot run
                    error = f"{type(exc).__name__}: {exc}"
            actual_calls = flash_attn.CALLS[first:]
            manifest = []
            mpath = os.path.join(folder, "manifest.jsonl")
            if os.path.exists(mpath):
                with open(mpath) as fh:
                    manifest = [json.loads(line) for line in fh if line.strip()]
            if error:
                problems.append(f"{name}/{scenario}: the model raised {error}")
            if len(manifest) != len(actual_calls):
                problems.append(f"{name}/{scenario}: {len(manifest)} captured calls but "
                                f"{len(actual_calls)} kernel calls")
            for entry, actual in zip(manifest, actual_calls):
                path = os.path.join(folder, entry["file"])
                with open(path) as fh:
                    doc = json.load(fh)
                row = {"model": name, "scenario": scenario, "fa2": how, "call": entry["call"],
                       "layer": entry.get("layer_idx"), "file": os.path.relpath(path, captures),
                       "query_length": doc.get("batch", {}).get("query_length"),
                       "actual": actual, "hook_agrees": hook_agrees(actual, entry.get("observed", []))}
                if binary:
                    report, err = check(binary, path)
                    if report is None:
                        row.update(status="check-error", detail=err)
                    else:
                        diffs = compare(actual, report)
                        row.update(report_varlen=report.get("varlen"),
                                   report_status=report.get("status"),
                                   first_violation=(report.get("first_violation") or {}).get("id"),
                                   status="match" if not diffs else "MISMATCH", detail="; ".join(diffs))
                else:
                    row.update(status="unchecked", detail="attn-doctor binary not found")
                rows.append(row)

    print(f"device: {device} ({torch.cuda.get_device_name(0) if device == 'cuda' else 'cpu'}), "
          f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"flash_attn stand-in {flash_attn.__version__}, attn_doctor {attn_doctor.__version__}")
    print(f"captures: {captures}")
    header = f"{'model':9} {'scenario':11} {'call':>4} {'lyr':>3} {'Lq':>3} {'kernel':6} " \
             f"{'cu_seqlens_q (actual)':24} {'max_q':>6} {'report path':12} {'cu_seqlens_q (report)':24} {'max_q':>6} result"
    print(header)
    print("-" * len(header))
    for r in rows:
        a = r["actual"]
        rv = r.get("report_varlen") or {}
        mq = a.get("max_seqlen_q")
        mq = "-" if mq is None else (f"{mq}T" if a.get("max_seqlen_q_is_tensor") else str(mq))
        rq = rv.get("max_seqlen_q")
        rq = "-" if rq is None else (f"{_value(rq)}T" if rv.get("max_seqlen_is_tensor") else str(_value(rq)))
        print(f"{r['model']:9} {r['scenario']:11} {r['call']:>4} {str(r['layer']):>3} "
              f"{str(r['query_length']):>3} {a['fn']:6} {short(a.get('cu_seqlens_q')):24} {mq:>6} "
              f"{str(rv.get('path', '-')):12} {short(rv.get('cu_seqlens_q')):24} {rq:>6} {r['status']}"
              + ("" if r["hook_agrees"] else " (hook disagrees)")
              + (f"  {r['detail']}" if r.get("detail") and r["status"] not in ("match", "unchecked") else ""))
    counts = {s: sum(1 for r in rows if r["status"] == s)
              for s in ("match", "MISMATCH", "check-error", "unchecked")}
    hook_bad = sum(1 for r in rows if not r["hook_agrees"])
    print("-" * len(header))
    for p in problems:
        print(f"problem: {p}")
    if not binary:
        print(f"attn-doctor binary not found ({args.attn_doctor}): {len(rows)} calls captured "
              "and recorded, NOT checked. Build it (cmake --build build) or pass --attn-doctor.")
    print(f"{counts['match']} matched, {counts['MISMATCH']} mismatched, {counts['check-error']} "
          f"check errors, {counts['unchecked']} unchecked; hook self-check disagreements: {hook_bad}; "
          f"{time.time() - started:.1f} s")

    summary = {"device": device,
               "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
               "torch": torch.__version__, "transformers": transformers.__version__,
               "flash_attn_standin": flash_attn.__version__, "attn_doctor_python": attn_doctor.__version__,
               "attn_doctor_binary": binary, "checked": bool(binary), "counts": counts,
               "hook_disagreements": hook_bad, "problems": problems, "rows": rows}
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "capture_roundtrip.json"), "w") as fh:
            json.dump(summary, fh, indent=1, sort_keys=True)
        with tarfile.open(os.path.join(out, "captures.tar.gz"), "w:gz") as tar:
            tar.add(captures, arcname="captures")
        print(f"summary: {os.path.join(out, 'capture_roundtrip.json')}")
    if problems or hook_bad or counts["MISMATCH"] or counts["check-error"]:
        return 1
    if not binary:
        return 0 if args.capture_only else 3
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
