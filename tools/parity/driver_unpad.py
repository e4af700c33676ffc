"""Run a library's own unpadding helper on the batch files' attention masks.

  --lib flash_attn --module PATH   flash-attn's bert_padding.py, taken from the release's sdist
                                   (parity.py unpacks it under .cache/, it is not committed);
                                   calls unpad_input(hidden_states, attention_mask) with the keys
                                   (B, Lk, Hk, D) as hidden states.
  --lib fla --module PATH          FLA's fla/layers/utils.py (the attention layer's unpadding);
                                   calls unpad_input(q, (k, v), attention_mask, q_len).

Writes {"environment": ..., "cases": [...]}; each case holds what the helper returned (number of
return values, gather indices, cu_seqlens, max_seqlen) or the exception it raised.
"""

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import batchfile  # noqa: E402
import tracing  # noqa: E402


def describe(value):
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape),
                "values": value.reshape(-1).tolist()}
    if isinstance(value, (int, float)):
        return {"value": value, "is_tensor": False, "python_type": type(value).__name__}
    return repr(value)


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_flash_attn(module, case):
    q, k, v = batchfile.make_qkv(case)
    out = module.unpad_input(k, case["attention_mask"])
    result = {"returns": len(out), "total_k": out[0].shape[0], "indices": describe(out[1]),
              "cu_seqlens": describe(out[2]), "max_seqlen": describe(out[3])}
    if len(out) > 4:
        result["used_seqlens"] = describe(out[4])
    return result


def run_fla(module, case):
    q, k, v = batchfile.make_qkv(case)
    q_out, (k_out, v_out), indices_q, (cu_q, cu_k), (max_q, max_k) = module.unpad_input(
        q, (k, v), case["attention_mask"], case["query_length"])
    return {"total_q": q_out.shape[0], "total_k": k_out.shape[0], "indices_q": describe(indices_q),
            "cu_seqlens_q": describe(cu_q), "cu_seqlens_k": describe(cu_k),
            "max_seqlen_q": describe(max_q), "max_seqlen_k": describe(max_k)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=["flash_attn", "fla"], required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("batches", nargs="+")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if args.lib == "flash_attn":
        module = load_module("bert_padding", args.module)
        runner = run_flash_attn
    else:
        module = importlib.import_module("fla.layers.utils")
        runner = run_fla
    cases = []
    for path in args.batches:
        doc = json.loads(Path(path).read_text())
        if "attention_mask" not in doc.get("batch", {}):
            continue
        case = batchfile.load(path)
        entry = {"batch": Path(path).name}
        try:
            entry["result"], entry["error"] = runner(module, case), None
        except Exception as exc:
            entry["result"], entry["error"] = None, tracing.describe_exception(exc)
        cases.append(entry)
    env = {"torch": torch.__version__, "python": sys.version.split()[0]}
    Path(args.out).write_text(json.dumps({"environment": env, "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
