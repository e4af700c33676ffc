"""Collator goldens of LlamaFactory's neat_packing, from the real releases.

    python collate_llamafactory.py [--releases 0.9.3,0.9.4,0.9.5]   # collate-llamafactory-<release>.json

Environments (each `pip install --target DIR --no-deps`): the release under
$PARITY_VENVS/<PARITY_PATCHED_PREFIX>llamafactory-<release>; $PARITY_VENVS/<PARITY_LF_PREFIX>lf-deps
holding accelerate 1.7.0, peft 0.15.2, datasets 3.6.0 (pyarrow, dill, multiprocess, xxhash,
pandas, requests, aiohttp and theirs), torchaudio 2.6.0, omegaconf 2.3.0 (antlr4 4.9.3);
lf-trl-0.9.6, lf-trl-0.24.0 and lf-peft-0.18.1 beside it (below).

Each release is imported from its wheel (`pip install --target $PARITY_VENVS/<prefix>llamafactory-<release>
--no-deps llamafactory==<release>`) beside the packages its data modules import
($PARITY_LF_DEPS: accelerate, peft, datasets and theirs, torchaudio, omegaconf; trl 0.9.6 for
0.9.3, which imports it; peft 0.18.1 for 0.9.5, whose transformers asks for it), on the newest transformers release it allows ($PARITY_VENVS/tf-<release>) and the
torch of $PARITY_PYTHON. Nothing is stubbed and no network is used: the tokenizer is a local
WordLevel vocabulary (`tokenizers` -> `PreTrainedTokenizerFast`, pad id 0, eos id 1, right padding).

What runs, all from the release:
- `DataArguments(template="empty", cutoff_len=C, neat_packing=True)`: its `__post_init__` turns
  packing on and lowers cutoff_len by one; `get_template_and_fix_tokenizer` gives the template;
- `PackedSupervisedDatasetProcessor.preprocess_dataset` on the case's examples (a prompt and a
  response of words): it encodes (and truncates to the cutoff), packs with `greedy_knapsack` and
  pads each row;
- `SFTDataCollatorWith4DAttentionMask` constructed as `train/sft/workflow.py` constructs it
  (`pad_to_multiple_of=8` when training, `label_pad_token_id=-100`, `block_diag_attn` = neat_packing
  as `hparams/parser.py` derives it, `neat_packing` where the release has the field, the case's
  attention implementation, compute dtype float32, `model=None`), called on every packed row at once.

The golden keeps, per case, the examples as the processor encoded them (their token ids), the
options the replay takes (`cutoff_len` as the processor sees it, `knapsack: true`, the attention
implementation, `pad_to_multiple_of`), the rows the processor built, and what the collator emitted:
every tensor's dtype, shape and values; a floating 4-D mask as 1 where it holds the dtype's
minimum (masked) and 0 where it holds 0.0, the batch format's convention. A release that raises is
recorded as raised.

The C++ replay (lib/batch/collate_llamafactory.cpp) must reproduce every case exactly
(tests/test_collate_golden.cpp).
"""

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collate import VENVS, record_golden  # noqa: E402  (the collator drivers' shared start-up)

# the release trees lie under $PARITY_VENVS/<PARITY_PATCHED_PREFIX>llamafactory-<release> (as for
# collate_patched.py), the packages they import under $PARITY_VENVS/<PARITY_LF_PREFIX>lf-*
PREFIX = os.environ.get("PARITY_PATCHED_PREFIX", "")
LF = os.environ.get("PARITY_LF_PREFIX", "")
DEPS = [p for p in os.environ.get("PARITY_LF_DEPS", f"{VENVS}/{LF}lf-deps").split(":") if p]
# what the fake-image cases add: pillow (the collator's fake image) and torchvision (the image and
# video processors of transformers 5.x)
MM_DEPS = [p for p in os.environ.get("PARITY_LF_MM_DEPS", f"{VENVS}/{LF}lf-pillow:{VENVS}/{LF}lf-torchvision").split(":")
           if p]
PYTHON = os.environ.get("PARITY_PYTHON", str(VENVS / "torch26" / "bin" / "python"))
# the newest transformers each release allows (its Requires-Dist), installed under tf-<release>
RELEASES = {"0.9.3": "4.52.4", "0.9.4": "4.56.2", "0.9.5": "5.6.0"}
# before the shared ones: the trl each release checks for at import (0.9.3 imports it); the peft
# 0.9.5's transformers asks for
EXTRA = {"0.9.3": [f"{VENVS}/{LF}lf-trl-0.9.6"], "0.9.4": [f"{VENVS}/{LF}lf-trl-0.24.0"],
         "0.9.5": [f"{VENVS}/{LF}lf-peft-0.18.1", f"{VENVS}/{LF}lf-trl-0.24.0"]}


def words(n, base):
    return " ".join(f"w{base + i}" for i in range(n))


def cases():
    """(name, user cutoff_len, [(prompt words, response words)], attn, pad_to_multiple_of)."""
    c = []
    for attn in ("flash_attention_2", "sdpa", "eager"):
        a = attn.split("_")[0]
        c.append((f"one-row-{a}", 16, [(2, 1), (3, 2), (1, 1)], attn, 8))
        c.append((f"knapsack-order-{a}", 12, [(4, 3), (2, 1), (3, 2), (1, 1), (3, 3), (2, 2)], attn, 8))
        c.append((f"single-token-{a}", 10, [(2, 2), (1, 0), (2, 1)], attn, 8))
        c.append((f"same-lengths-{a}", 16, [(2, 1), (1, 2), (2, 1)], attn, 8))
        c.append((f"cutoff-truncated-{a}", 12, [(9, 8), (2, 1)], attn, 8))
        c.append((f"exact-fit-{a}", 8, [(3, 2), (1, 1)], attn, 8))
        c.append((f"cutoff-not-multiple-of-8-{a}", 13, [(3, 2), (2, 2)], attn, 8))
        c.append((f"no-pad-multiple-{a}", 13, [(3, 2), (2, 2)], attn, None))
    return c


# ---- one release, in a fresh interpreter ------------------------------------------------

def tokenizer(cls=None, special=()):
    """The local WordLevel tokenizer (pad 0, eos 1, unk 2, w3 .. w199), as `cls` (a
    PreTrainedTokenizerFast by default), with `special` added as special tokens (200, 201, ...)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for i in range(3, 200):
        vocab[f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out = (cls or PreTrainedTokenizerFast)(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                           unk_token="<unk>", padding_side="right")
    if special:
        out.add_tokens(list(special), special_tokens=True)
    return out


# the Qwen2-VL template's own tokens (its chat format, its vision markers and placeholders)
QWEN2_VL_TOKENS = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                   "<|video_pad|>"]


def qwen2_vl_processor():
    """A real Qwen2VLProcessor built locally: the release's Qwen2VLImageProcessor and
    Qwen2VLVideoProcessor with their defaults, and the local tokenizer as a Qwen2 tokenizer
    (the processor accepts no other) with the template's tokens."""
    import transformers
    from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
    cls = getattr(transformers, "Qwen2TokenizerFast", None) or transformers.Qwen2Tokenizer
    tok = tokenizer(cls, QWEN2_VL_TOKENS)
    proc = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tok,
                            video_processor=Qwen2VLVideoProcessor())
    return tok, proc


def describe(key, value):
    import torch
    if isinstance(value, torch.Tensor):
        if torch.is_floating_point(value):  # the 4-D additive mask: 1 = masked (the dtype's minimum)
            vals = [int(x != 0) for x in value.flatten().tolist()]
        else:
            vals = [int(x) for x in value.flatten().tolist()]
        return {"key": key, "dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape), "values": vals}
    return {"key": key, "dtype": type(value).__name__, "shape": [], "values": []}


def mm_cases():
    """The fake-image path: (name, user cutoff_len, examples, attn, pad_to_multiple_of), on the
    Qwen2-VL template with a real processor and no image in the batch (the template's default
    system prompt makes each example 15 tokens or more)."""
    return [("fake-image-flash", 40, [(1, 1), (1, 1)], "flash_attention_2", 8),
            ("fake-image-two-rows-flash", 24, [(1, 1), (2, 1)], "flash_attention_2", 8),
            ("fake-image-no-pad-multiple-flash", 37, [(1, 1), (2, 1)], "flash_attention_2", None),
            ("fake-image-sdpa", 40, [(1, 1), (1, 1)], "sdpa", 8),
            ("fake-image-two-rows-sdpa", 24, [(1, 1), (2, 1)], "sdpa", 8),
            ("fake-image-eager", 40, [(1, 1), (1, 1)], "eager", 8)]


TEXT_KEYS = ("input_ids", "attention_mask", "position_ids", "labels")


def record_case(name, cutoff, examples, attn, multiple, template_name, fields):
    """One case through the release's DataArguments, template, processor and collator."""
    import torch
    from llamafactory.data.collator import SFTDataCollatorWith4DAttentionMask
    from llamafactory.data.processor.supervised import PackedSupervisedDatasetProcessor
    from llamafactory.data.template import get_template_and_fix_tokenizer
    from llamafactory.extras.constants import IGNORE_INDEX
    from llamafactory.hparams import DataArguments
    if template_name == "empty":
        tok, mm = tokenizer(), None
    else:
        tok, mm = qwen2_vl_processor()
    data_args = DataArguments(template=template_name, cutoff_len=cutoff, neat_packing=True)
    template = get_template_and_fix_tokenizer(tok, data_args)
    proc = PackedSupervisedDatasetProcessor(template=template, tokenizer=tok, processor=mm, data_args=data_args)
    base = 3
    prompts, responses = [], []
    for p, r in examples:
        prompts.append([{"role": "user", "content": words(p, base)}])
        responses.append([{"role": "assistant", "content": words(r, base + p)}])
        base += p + r
    n = len(examples)
    batch = {"_prompt": prompts, "_response": responses, "_system": [""] * n, "_tools": [""] * n,
             "_images": [None] * n, "_videos": [None] * n, "_audios": [None] * n}
    encoded = []
    for i in range(n):
        ids, _ = proc._encode_data_example(prompt=prompts[i], response=responses[i], system="", tools="",
                                           images=[], videos=[], audios=[])
        encoded.append(ids)
    rec = {"name": name, "user_cutoff_len": cutoff, "processor_cutoff_len": data_args.cutoff_len,
           "options": {"cutoff_len": data_args.cutoff_len, "knapsack": True, "attn_implementation": attn},
           "examples": encoded}
    if template_name != "empty":
        rec["template"] = template_name
        rec["image_processor"] = type(mm.image_processor).__name__
    if multiple is not None:
        rec["options"]["pad_to_multiple_of"] = multiple
    try:
        rows = proc.preprocess_dataset(batch)
        rec["rows"] = {"input_ids": rows["input_ids"], "attention_mask": rows["attention_mask"],
                       "position_ids": rows["position_ids"]}
        features = [{k: rows[k][i] for k in rows} for i in range(len(rows["input_ids"]))]
        kwargs = dict(template=template, model=None, pad_to_multiple_of=multiple, label_pad_token_id=IGNORE_INDEX,
                      block_diag_attn=data_args.neat_packing, attn_implementation=attn,
                      compute_dtype=torch.float32, tokenizer=tok, processor=mm)
        if "neat_packing" in fields:
            kwargs["neat_packing"] = data_args.neat_packing
        row0 = list(features[0]["input_ids"])
        try:
            emitted = SFTDataCollatorWith4DAttentionMask(**kwargs)(features)
        finally:
            if template_name != "empty":
                # the collator assigns row 0 its input ids with the fake image's appended (a
                # right-padding tokenizer) before anything can raise: what it appended, measured
                # on the features it was given
                fake = features[0]["input_ids"][len(row0):]
                rec["fake_input_ids"] = fake
                rec["options"]["fake_mm_tokens"] = len(fake)
        if template_name != "empty":
            # the processor's image tensors follow the text keys: kept apart (the replay emits the
            # text keys), pixel values by dtype and shape
            rec["mm_inputs"] = [dict(describe(k, v), values=[] if torch.is_floating_point(v) else describe(k, v)["values"])
                                for k, v in emitted.items() if k not in TEXT_KEYS]
            emitted = {k: v for k, v in emitted.items() if k in TEXT_KEYS}
        rec["emitted"] = [describe(k, v) for k, v in emitted.items()]
    except Exception as e:  # what the release raises is the golden
        rec["raised"] = {"type": type(e).__name__, "message": str(e)}
    return rec


def run(release):
    import dataclasses
    import logging
    import warnings

    import torch
    import transformers
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    from llamafactory.data.collator import SFTDataCollatorWith4DAttentionMask
    fields = {f.name for f in dataclasses.fields(SFTDataCollatorWith4DAttentionMask)}
    out = {"format": "attn-doctor/collate-golden@1", "library": "llamafactory", "release": release,
           "collator": "llamafactory.neat_packing", "torch": torch.__version__.split("+")[0],
           "transformers": transformers.__version__,
           "command": "python tools/parity/collate_llamafactory.py --releases " + release,
           "executed": f"llamafactory {release} from its wheel: hparams DataArguments (template \"empty\", neat_packing), "
                       "data/template.py get_template_and_fix_tokenizer, data/processor/supervised.py "
                       "PackedSupervisedDatasetProcessor.preprocess_dataset, data/collator.py "
                       "SFTDataCollatorWith4DAttentionMask as train/sft/workflow.py constructs it; a local WordLevel "
                       f"tokenizer on transformers {transformers.__version__}",
           "collator_fields": sorted(fields), "cases": []}
    for case in cases():
        out["cases"].append(record_case(*case, "empty", fields))
    out["executed_mm"] = (f"the fake-image cases: template \"qwen2_vl\" with a Qwen2VLProcessor of transformers "
                          f"{transformers.__version__}'s Qwen2VLImageProcessor and Qwen2VLVideoProcessor (their "
                          "defaults) and the local tokenizer as a Qwen2 tokenizer; no image in the batch, so "
                          "MultiModalDataCollatorForSeq2Seq appends a fake image's tokens to row 0")
    for case in mm_cases():
        out["cases"].append(record_case(*case, "qwen2_vl", fields))
    return out


# ---- orchestration -----------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--releases")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        json.dump(run(a.one), sys.stdout)
        return
    for release in a.releases.split(",") if a.releases else list(RELEASES):
        site = VENVS / f"{PREFIX}llamafactory-{release}"
        tf = VENVS / f"tf-{RELEASES[release]}"
        for p in (site / "llamafactory", tf / "transformers"):
            if not p.is_dir():
                raise SystemExit(f"{p} is missing (see this file's docstring)")
        record_golden(PYTHON, [__file__, "--one", release], [site, *EXTRA.get(release, []), *DEPS, *MM_DEPS, tf],
                      f"collate-llamafactory-{release}.json", f"llamafactory {release}", HF_HUB_OFFLINE="1")


if __name__ == "__main__":
    main()
