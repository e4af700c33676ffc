"""attn_doctor's capture and guard on a real transformers release, with a mask given to the model.

A tiny random Llama (2 layers, attn_implementation="flash_attention_2", the stand-in flash_attn
computing attention on the CPU) runs a forward on a LlamaFactory neat_packing-style batch: three
packed sequences numbered 1, 2, 3 in the attention mask, then padding. Three runs:

  capture        attn_doctor.capture(every=True): what the batch files say, and the first
                 violation `attn-doctor check --backend none` finds in the first one
  guard          attn_doctor.guard(): whether the forward is stopped, and by which invariant
  guard_no_entry the guard with the model-entry hook's view removed (hooks.model_inputs returns
                 None): the attention-level view alone, as before the model entry was hooked

Run with PYTHONPATH = the stand-in flash_attn (parity.standin), the release (tf-<release>) and
the package (python/), ATTN_DOCTOR_NATIVE_DIR = the folder of the built extension, and
ATTN_DOCTOR_BINARY = build/attn-doctor:

    python tools/parity/model_mask_hooks.py --out result.json
"""

import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tracing  # noqa: E402

SEGMENTS = [[1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 0, 0]]


def main():
    args, env = tracing.start_model_driver()
    from flash_attn import _recorder
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    import attn_doctor
    from attn_doctor import hooks

    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0)
    model = LlamaForCausalLM._from_config(config, attn_implementation="flash_attention_2", torch_dtype=torch.bfloat16)
    model.eval()
    mask = torch.tensor(SEGMENTS)
    ids = torch.randint(3, 59, tuple(mask.shape), generator=torch.Generator().manual_seed(1))
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "attention_mask": SEGMENTS}

    # what reached the stand-in flash-attn without any hook
    _recorder.CALLS.clear()
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, use_cache=False)
    varlen = [c for c in _recorder.CALLS if c["kind"] == "flash_attn_varlen_func"]
    result["kernel_cu_seqlens_q"] = varlen[0]["cu_seqlens_q"]["values"] if varlen else None

    with tempfile.TemporaryDirectory() as out:
        with attn_doctor.capture(out, every=True, announce=False) as cap:
            with torch.no_grad():
                model(input_ids=ids, attention_mask=mask, use_cache=False)
        doc = json.loads(Path(cap.files[0]).read_text())
        report = attn_doctor.check(cap.files[0], backend="none")
        result["capture"] = {"files": len(cap.files), "attention_mask": doc["batch"]["attention_mask"],
                             "first_violation": (report.get("first_violation") or {}).get("id"),
                             "violations": [v["id"] for v in report.get("violations", [])],
                             "message": (report.get("first_violation") or {}).get("message")}

    def guarded():
        try:
            with attn_doctor.guard(), torch.no_grad():
                model(input_ids=ids, attention_mask=mask, use_cache=False)
            return {"raised": False}
        except attn_doctor.VarlenError as err:
            return {"raised": True, "id": err.id, "entry": err.entry, "message": str(err).splitlines()[0]}

    result["guard"] = guarded()
    real = hooks.model_inputs
    hooks.model_inputs = lambda: None
    try:
        result["guard_no_entry"] = guarded()
    finally:
        hooks.model_inputs = real
    result["patches"] = env["patches"]
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
