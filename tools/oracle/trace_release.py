"""pack.py's helper: run one transformers release's conversion on batch files, on the CPU, and
report what each call did and which of the release's module files were loaded.

    ORACLE_STACK=DIR python trace_release.py RELEASE BATCH.json... > result.json

DIR holds `transformers-RELEASE/` (the full wheel, or the trimmed copy being verified). The
attention is the dry-cpu stand-in (a plain PyTorch attention): what is compared between the full
and the trimmed copy is the conversion (the release's result or exception), not a kernel.
"""

import hashlib
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "parity")]
os.environ["ORACLE_DRY_CPU"] = "1"

import stack  # noqa: E402


# A batch of more elements per padded tensor is not traced: q, k, v and their gathers would need
# tens of GiB of host memory, and its conversion runs the same code as the release's smaller
# batches (the file set is what is traced).
TRACE_LIMIT = 1 << 27


def padded_elements(doc):
    """B x L x H x D of the batch's padded q, from the batch file's description."""
    batch, model = doc["batch"], doc["model"]
    mask = batch.get("attention_mask") or {}
    rows = width = 1
    if isinstance(mask, dict) and "lengths" in mask:
        rows, width = len(mask["lengths"]), mask.get("width") or max(mask["lengths"], default=1)
    elif isinstance(mask, dict) and "shape" in mask:
        shape = mask["shape"]
        rows, width = shape[0], shape[-1]
    heads = model.get("num_heads") or model.get("num_attention_heads") or 1
    return rows * width * heads * (model.get("head_dim") or 1)


def main():
    release, batches = sys.argv[1], sys.argv[2:]
    stack.install_standin("2.6.3", os.environ.get("ORACLE_WORK", "/tmp/oracle-work"))
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    stack.load_transformers(release)
    stack.ensure_flash_attn_available(dry=True)
    import batchfile
    import tracing
    target = tracing.load_target()
    results = {}
    for path in batches:
        doc = json.loads(Path(path).read_text())
        if doc["model"].get("architecture") in ("gemma2", "qwen2_vl") or "batch" not in doc:
            continue
        if padded_elements(doc) > TRACE_LIMIT:  # the same code path as the release's smaller cases
            results[Path(path).name] = {"skipped": f"more than {TRACE_LIMIT} elements per tensor"}
            continue
        case = batchfile.load(path)
        try:
            target.call(case)
            out = target.last_output
            digest = hashlib.sha256(out.detach().float().numpy().tobytes()).hexdigest()[:16] if out is not None else None
            results[Path(path).name] = {"out": digest}
        except Exception as exc:  # the release's own failure is part of what must match
            results[Path(path).name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    root = (stack.stack_root() / f"transformers-{release}").resolve()
    # vars(): a module's own __file__, never its module-level __getattr__ (5.x's deprecated
    # aliases import their target on attribute access)
    paths = [vars(m).get("__file__") if hasattr(m, "__dict__") else None for m in list(sys.modules.values())]
    files = sorted({os.path.relpath(p, root) for p in paths
                    if isinstance(p, str) and str(Path(p).resolve()).startswith(str(root))})
    print(json.dumps({"release": release, "results": results, "files": files}))


if __name__ == "__main__":
    main()
