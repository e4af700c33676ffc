"""Model-level mask goldens (parity.py model): tests/golden/model-llama-<release>.json, a tiny
random Llama's forward with a mask given to the model (segment ids, padding, all ones) on every
release from 4.43 (the first with transformers.modeling_flash_attention_utils). Each scenario
is described by a batch file (batches 070-076, `attention_mask.level: "model"`) that
`write_batches` writes from SCENARIOS; tests/test_convert_golden.cpp replays them."""

import scenario_goldens

RELEASES = [
    "4.43.4", "4.44.0", "4.44.2", "4.45.2", "4.46.3", "4.47.1", "4.48.3", "4.49.0", "4.50.3", "4.51.3", "4.52.4",
    "4.53.0", "4.53.1", "4.53.3", "4.54.0", "4.54.1", "4.55.0", "4.55.4", "4.56.2", "4.57.6", "5.0.0", "5.2.0",
    "5.4.0", "5.5.0", "5.8.1", "5.13.1", "5.14.1", "5.16.0", "5.20.0", "5.23.0", "5.24.0",
]

# name -> (batch file, the model's inputs besides input_ids)
SCENARIOS = {
    # LlamaFactory neat_packing: three packed sequences (5, 3, 4) numbered 1, 2, 3, then padding
    "segment_ids_b1": {"batch": "070-llama-segment-ids-b1.json",
                       "attention_mask": [[1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 0, 0]]},
    # the multipack convention of repro_cases/segment-id-mask-4.43.4.json (OpenRLHF#377)
    "segment_ids_b2": {"batch": "071-llama-segment-ids-b2.json",
                       "attention_mask": [[1, 1, 1, 2, 2, 0], [1, 1, 2, 2, 2, 2]]},
    # no 0 anywhere (OpenRLHF#587: "attention_mask will be set to None when there is no 0 in it")
    "segment_ids_no_zero": {"batch": "072-llama-segment-ids-no-zero.json",
                            "attention_mask": [[1, 1, 1, 2, 2, 2]]},
    "right_padding": {"batch": "073-llama-right-padding.json",
                      "attention_mask": [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]]},
    "left_padding": {"batch": "074-llama-left-padding.json",
                     "attention_mask": [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]},
    "all_ones": {"batch": "075-llama-all-ones.json", "attention_mask": [[1] * 6, [1] * 6]},
    # segment ids next to position ids that restart per sequence
    "segment_ids_and_position_ids": {"batch": "076-llama-segment-ids-position-ids.json",
                                     "attention_mask": [[1, 1, 1, 2, 2, 0]],
                                     "position_ids": [[0, 1, 2, 0, 1, 0]]},
    # an all-ones mask narrower than the keys: a static cache of 8 slots holds the 6 tokens
    # (masking_utils.flash_attention_mask: dropped as all True up to 5.12, kept from 5.13.0 so
    # that _upad_input cuts the keys to the mask; up to 4.52 _update_causal_mask drops it).
    "static_cache_all_ones": {"batch": "077-llama-static-cache-all-ones.json",
                              "attention_mask": [[1] * 6, [1] * 6], "static_cache": 8},
}

MODEL = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 16, "hidden_size": 64, "architecture": "llama"}


def batch_for(name, spec):
    batch = {"attention_mask": {"values": spec["attention_mask"], "level": "model"}}
    if "position_ids" in spec:
        batch["position_ids"] = {"values": spec["position_ids"], "level": "model"}
    if "static_cache" in spec:
        batch.update(query_length=len(spec["attention_mask"][0]), kv_length=spec["static_cache"],
                     cache={"kind": "static", "max_cache_len": spec["static_cache"], "past_length": 0})
    return {
        "format": "attn-doctor/batch@1",
        "name": "llama-" + name.replace("_", "-"),
        "description": "Model level: a tiny Llama's forward (flash_attention_2) given this mask"
                       + (" and these position ids" if "position_ids" in spec else "")
                       + (f" and a static cache of {spec['static_cache']} slots" if "static_cache" in spec else "")
                       + "; tools/parity/llama_mask.py, goldens tests/golden/model-llama-<release>.json.",
        "environment": {"flash_attn": "2.6.3"},
        "model": dict(MODEL),
        "batch": batch,
    }


def write_batches(batches_dir, dumps):
    scenario_goldens.write_batches(SCENARIOS, batch_for, batches_dir, dumps)


def run(run_python, standin, python_for, site_for, golden_dir, batches_dir, dumps, cache, only=None):
    write_batches(batches_dir, dumps)
    scenario_goldens.write(
        "model-llama", RELEASES, only,
        scenario_goldens.recorder(run_python, "driver_llama_mask.py", cache, "llama-mask",
                                  lambda r: [standin("2.6.3"), site_for(r)], lambda r: python_for(r, "model")),
        scenario_goldens.transformers_header(
            "attn-doctor/golden-model@1", "transformers.LlamaForCausalLM.forward (2 layers, random init, use_cache=False)"),
        {name: spec["batch"] for name, spec in SCENARIOS.items()}, golden_dir, dumps)
