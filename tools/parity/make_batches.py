"""Write the parity batch matrix, tests/golden/batches/NNN-<name>.json.

The batches are the inputs both sides replay: the real releases (parity.py) and the C++ replay
(tests/test_convert_golden.cpp). They are small on purpose (a few rows, <= 64 tokens) so that a
golden can be read by eye. Rerun after editing; existing files are overwritten.
"""

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "batches"
FA = {"flash_attn": "2.6.3"}


def model(heads=4, kv_heads=None, head_dim=8, **extra):
    m = {"num_heads": heads, "head_dim": head_dim}
    if kv_heads is not None:
        m["num_kv_heads"] = kv_heads
    m.update(extra)
    return m


def lengths(ls, width, side):
    return {"lengths": ls, "width": width, "padding_side": side}


def mask(values):
    return {"values": values}


def pos(values, **extra):
    p = {"values": values}
    p.update(extra)
    return p


def packed_row(ls, origin=0):
    return [origin + i for n in ls for i in range(n)]


B = []


def add(name, description, batch, mdl=None, env=None, references=None, number=None):
    doc = {"format": "attn-doctor/batch@1", "name": name, "description": description}
    if number is not None:
        doc["_number"] = number  # 054-057 are written by gemma2.py; later batches are numbered here
    if references:
        doc["references"] = references
    doc["environment"] = dict(env or FA)
    doc["model"] = mdl or model()
    doc["batch"] = batch
    B.append(doc)


# --- attention mask path -----------------------------------------------------------------
add("right-padding", "Prefill, two rows right-padded to 5.",
    {"attention_mask": lengths([5, 3], 5, "right")})
add("left-padding", "Prefill, two rows left-padded to 5.",
    {"attention_mask": lengths([5, 3], 5, "left")})
add("full-mask", "Prefill with an all-ones mask (no padding at all).",
    {"attention_mask": mask([[1] * 6, [1] * 6])})
add("decode-left-padding", "Decode step (Lq = 1) over 6 cached keys, left padding.",
    {"attention_mask": lengths([6, 4], 6, "left"), "query_length": 1, "kv_length": 6})
add("decode-right-padding", "Decode step (Lq = 1) with a right-padded mask.",
    {"attention_mask": lengths([6, 4], 6, "right"), "query_length": 1, "kv_length": 6})
add("partial-query-left", "Two new query tokens over 6 keys (chunked prefill), left padding.",
    {"attention_mask": lengths([6, 3], 6, "left"), "query_length": 2, "kv_length": 6})
add("partial-query-right", "Two new query tokens over 6 keys, right padding: mask[:, -Lq:] assumes left.",
    {"attention_mask": lengths([6, 3], 6, "right"), "query_length": 2, "kv_length": 6},
    references=["huggingface/transformers#35032"])
add("segment-id-mask", "Mask holding segment ids (1,1,2,2,0) instead of 0/1.",
    {"attention_mask": mask([[1, 1, 2, 2, 0], [1, 1, 1, 2, 2]])})
add("mask-narrower-prefill", "Mask of width 4 for 6 keys and 6 queries.",
    {"attention_mask": mask([[1, 1, 1, 1], [0, 1, 1, 1]]), "query_length": 6, "kv_length": 6})
add("mask-narrower-decode", "Decode over 8 keys with a mask cut to the last 6 columns (sliding window).",
    {"attention_mask": mask([[1] * 6, [0, 0, 1, 1, 1, 1]]), "query_length": 1, "kv_length": 8},
    references=["huggingface/transformers#32309"])
add("mask-wider-prefill", "Mask of width 8 for 6 keys (mask longer than the key length).",
    {"attention_mask": mask([[1] * 8, [0, 0, 1, 1, 1, 1, 1, 1]]), "query_length": 6, "kv_length": 6})
add("mask-wider-decode", "Decode over 5 cached keys with the full 8-column mask (FLA decoding).",
    {"attention_mask": mask([[1] * 8, [0, 0, 0, 1, 1, 1, 1, 1]]), "query_length": 1, "kv_length": 5},
    references=["fla-org/flash-linear-attention#206"])
add("mask-4d-additive", "Square additive 4-D mask (B,1,Q,K) reaching the unpad path.",
    {"attention_mask": {"shape": [2, 1, 5, 5], "from": lengths([5, 3], 5, "right"),
                        "style": "additive", "causal": True}},
    references=["Dao-AILab/flash-attention#1156"])
add("mask-4d-boolean", "Square boolean 4-D mask (B,1,Q,K) reaching the unpad path.",
    {"attention_mask": {"shape": [2, 1, 5, 5], "from": lengths([5, 3], 5, "right"),
                        "style": "boolean", "causal": True}})
add("mask-4d-boolean-b1", "Boolean 4-D mask for one unpadded row of 4.",
    {"attention_mask": {"shape": [1, 1, 4, 4], "from": mask([[1, 1, 1, 1]]),
                        "style": "boolean", "causal": True}})
add("gqa-right-padding", "GQA (8 query heads, 2 kv heads), right padding.",
    {"attention_mask": lengths([7, 4], 7, "right")}, model(heads=8, kv_heads=2))
add("sliding-window-mask", "Sliding window 4 over 8 keys, right padding.",
    {"attention_mask": lengths([8, 5], 8, "right")}, model(sliding_window=4))
add("sliding-window-longer", "Sliding window 16 longer than the 6 keys: no window passed.",
    {"attention_mask": lengths([6, 2], 6, "right")}, model(sliding_window=16))
add("softcap-mask", "Logit softcap 50 with a padded mask.",
    {"attention_mask": lengths([4, 2], 4, "left")}, model(softcap=50.0))
add("bool-mask", "Boolean 2-D mask.",
    {"attention_mask": mask([[True, True, True, False], [True, True, False, False]])})
add("empty-row", "One row fully padded.",
    {"attention_mask": mask([[1, 1, 1], [0, 0, 0]])})
add("mask-b1-ones", "One row, all ones.",
    {"attention_mask": mask([[1, 1, 1, 1, 1]])})
add("decode-b1-mask", "Decode with one row and an all-ones mask over 7 keys.",
    {"attention_mask": mask([[1] * 7]), "query_length": 1, "kv_length": 7})

# --- position ids path ---------------------------------------------------------------------
add("packed-b1", "Three sequences (3, 2, 4) packed in one row via position ids.",
    {"position_ids": pos([packed_row([3, 2, 4])])})
add("packed-b2", "Two rows, each packing two sequences.",
    {"position_ids": pos([[0, 1, 2, 0, 1], [0, 1, 0, 1, 2]])})
add("packed-b2-one-plain", "Two rows: one plain arange, one packing two sequences.",
    {"position_ids": pos([[0, 1, 2, 3], [0, 1, 0, 1]])})
add("arange-b1", "One unpacked row 0..5.",
    {"position_ids": pos([list(range(6))])})
add("arange-b2", "Two unpacked rows 0..4.",
    {"position_ids": pos([list(range(5)), list(range(5))])})
add("origin-2-packed", "RoBERTa-like: positions start at padding_idx + 1 = 2, three packed sequences.",
    {"position_ids": pos([packed_row([3, 2, 3], origin=2)])},
    model(architecture="roberta", position_origin=2, causal=False),
    references=["huggingface/transformers#47496"])
add("origin-2-single", "RoBERTa-like single sequence 2..6.",
    {"position_ids": pos([list(range(2, 7))])},
    model(architecture="roberta", position_origin=2, causal=False))
add("offset-1024", "A context-parallel chunk whose positions start at 1024 (no 0).",
    {"position_ids": pos([list(range(1024, 1032))])},
    references=["PrimeIntellect-ai/prime-rl#2392", "huggingface/transformers#39814"])
add("offset-then-new", "A chunk continuing a sequence at 5, then a new sequence from 0.",
    {"position_ids": pos([[5, 6, 7, 0, 1, 2, 3]])})
add("padding-zeros", "One sequence of 4 followed by padding whose position ids are 0.",
    {"position_ids": pos([[0, 1, 2, 3, 0, 0, 0, 0]])},
    references=["hiyouga/LlamaFactory#10452"])
add("padding-zeros-packed", "Two packed sequences then zero-position padding.",
    {"position_ids": pos([[0, 1, 2, 0, 1, 0, 0, 0]])})
add("mrope-b1", "3-D mRoPE position ids (3, 1, 6) of one plain sequence, as they reach the conversion.",
    {"position_ids": pos([[list(range(6))]] * 3)},
    references=["huggingface/transformers#38007"])
add("mrope-packed", "3-D mRoPE position ids (3, 1, 7) packing two sequences, as they reach the conversion.",
    {"position_ids": pos([[[0, 1, 2, 0, 1, 2, 3]]] * 3)})
add("mrope-b2", "3-D mRoPE position ids (3, 2, 4), as they reach the conversion.",
    {"position_ids": pos([[list(range(4)), list(range(4))]] * 3)})
add("decode-posids-b2", "Decode (Lq = 1) over 6 keys with position ids and no mask, B = 2.",
    {"position_ids": pos([[5], [5]]), "query_length": 1, "kv_length": 6},
    references=["huggingface/transformers#32237"])
add("decode-posids-b1", "Decode (Lq = 1) over 8 keys with position ids and no mask.",
    {"position_ids": pos([[7]]), "query_length": 1, "kv_length": 8})
add("posids-rank1", "Rank-1 position ids packing two sequences.",
    {"position_ids": pos([0, 1, 2, 0, 1])})
add("mask-and-posids", "Left-padded mask and the position ids generate derives from it.",
    {"attention_mask": lengths([5, 3], 5, "left"), "position_ids": {"from": "mask"}})
add("ones-mask-and-packed", "All-ones mask together with packed position ids: which one wins.",
    {"attention_mask": mask([[1] * 7]), "position_ids": pos([[0, 1, 2, 0, 1, 2, 3]])})
add("partial-query-posids", "Two queries over 6 keys, B = 1, position ids only (chunked prefill).",
    {"position_ids": pos([[4, 5]]), "query_length": 2, "kv_length": 6})

# --- explicit flash kwargs ----------------------------------------------------------------
add("kwargs-full", "Collator kwargs cu_seq_lens_q/k and max_length_q/k with packed position ids.",
    {"position_ids": pos([packed_row([3, 2, 4])]),
     "flash_kwargs": {"cu_seq_lens_q": [0, 3, 5, 9], "cu_seq_lens_k": [0, 3, 5, 9],
                      "max_length_q": 4, "max_length_k": 4}})
add("kwargs-full-no-posids", "All four varlen kwargs, no position ids, no mask.",
    {"batch_size": 1, "kv_length": 9,
     "flash_kwargs": {"cu_seq_lens_q": [0, 3, 5, 9], "cu_seq_lens_k": [0, 3, 5, 9],
                      "max_length_q": 4, "max_length_k": 4}})
add("kwargs-cu-only", "cu_seq_lens_q/k without max_length_q/k, no position ids.",
    {"batch_size": 1, "kv_length": 9,
     "flash_kwargs": {"cu_seq_lens_q": [0, 3, 5, 9], "cu_seq_lens_k": [0, 3, 5, 9]}},
    references=["huggingface/transformers#47170"])
add("kwargs-cu-only-posids", "cu_seq_lens_q/k without max lengths, with packed position ids.",
    {"position_ids": pos([packed_row([3, 2, 4])]),
     "flash_kwargs": {"cu_seq_lens_q": [0, 3, 5, 9], "cu_seq_lens_k": [0, 3, 5, 9]}})
add("kwargs-max-only-posids", "max_length_q/k only, with packed position ids.",
    {"position_ids": pos([packed_row([3, 2, 4])]),
     "flash_kwargs": {"max_length_q": 4, "max_length_k": 4}})
add("kwargs-with-mask", "Full varlen kwargs and a padded mask: the mask wins.",
    {"attention_mask": mask([[1] * 7 + [0, 0]]),
     "flash_kwargs": {"cu_seq_lens_q": [0, 3, 7], "cu_seq_lens_k": [0, 3, 7],
                      "max_length_q": 4, "max_length_k": 4}})
add("kwargs-q-differs-k", "Varlen kwargs with different q and k boundaries (2 queries, 8 keys).",
    {"batch_size": 1, "query_length": 2, "kv_length": 8,
     "flash_kwargs": {"cu_seq_lens_q": [0, 1, 2], "cu_seq_lens_k": [0, 4, 8],
                      "max_length_q": 1, "max_length_k": 4}})
add("packed-gqa-window-softcap", "Packed position ids with GQA, sliding window 3 and softcap 30.",
    {"position_ids": pos([packed_row([4, 4])])},
    model(heads=4, kv_heads=2, sliding_window=3, softcap=30.0))

# --- flash-attn 2.7 (unpad_input returns five values) --------------------------------------
add("partial-query-left-fa27", "Partial query with flash-attn 2.7: unpad_input returns 5 values.",
    {"attention_mask": lengths([6, 3], 6, "left"), "query_length": 2, "kv_length": 6},
    env={"flash_attn": "2.7.0.post2"})
add("right-padding-fa27", "Right padding with flash-attn 2.7 (Lq == Lk: unpad_input not used).",
    {"attention_mask": lengths([5, 3], 5, "right")}, env={"flash_attn": "2.7.0.post2"})

# --- added after the Gemma-2 batches (054-057) ---------------------------------------------
add("continuation-b2", "Two rows: a sequence 0..4 and a context-parallel chunk continuing at 5..9.",
    {"position_ids": pos([list(range(5)), list(range(5, 10))])},
    references=["PrimeIntellect-ai/prime-rl#2392"], number=58)

# --- model level: Qwen2-VL (truth: tests/golden/qwen2vl-forward-<release>.json) -----------------
QWEN = model(heads=4, kv_heads=2, head_dim=16, hidden_size=64, architecture="qwen2_vl")
add("qwen2vl-padded", "Model level: Qwen2-VL text-only forward, left-padded mask, no position ids.",
    {"attention_mask": mask([[1] * 6, [0, 0, 1, 1, 1, 1]])}, QWEN, number=60)
add("qwen2vl-packed-2d", "Model level: Qwen2-VL text-only forward, two sequences packed in one row, 2-D ids.",
    {"position_ids": pos([[0, 1, 2, 0, 1, 2, 3]])}, QWEN,
    references=["huggingface/transformers#39168"], number=61)
add("qwen2vl-packed-3d", "Model level: Qwen2-VL text-only forward, two packed sequences, 3-D mRoPE ids.",
    {"position_ids": pos([[[0, 1, 2, 0, 1, 2, 3]]] * 3)}, QWEN,
    references=["huggingface/transformers#38007", "huggingface/transformers#44643"], number=62)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("[0-9][0-9][0-9]-*.json"):
        if "gemma2" not in old.name:
            old.unlink()
    i = 0
    for doc in B:
        number = doc.pop("_number", None)
        if number is None:
            i += 1
            number = i
        path = OUT / f"{number:03d}-{doc['name']}.json"
        path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(B)} batches to {OUT}")


if __name__ == "__main__":
    main()
