"""FLA GatedDeltaNet goldens (parity.py fla-layer): tests/golden/fla-gdn-<release>.json, which
boundaries FLA's own GatedDeltaNet layer hands to its kernels for a caller's cu_seqlens and
attention mask (driver_fla_layer.py). Up to 0.4.2 the mask replaces the caller's cu_seqlens
(fla-org/flash-linear-attention#838); from 0.5.0 the caller's win. Each scenario is described
by a batch file (batches 083-085, `layers` with implementation "fla"); the release is the
golden's, set by tests/test_convert_golden.cpp when it replays them."""

import scenario_goldens

RELEASES = ["0.4.2", "0.5.0", "0.6.0"]
# fla/__init__.py imports its models, which import transformers: a release of each FLA's time
# (0.6.0 imports PreTrainedConfig, which 4.x lacks)
TRANSFORMERS = {"0.4.2": "4.57.6", "0.5.0": "4.57.6", "0.6.0": "5.24.0"}

LAYER = {"hidden_size": 64, "head_dim": 16, "num_heads": 4, "mode": "chunk", "use_short_conv": True}

SCENARIOS = {
    # fla-org/flash-linear-attention#838: packed (3, 2, 4) with the caller's cu_seqlens and an
    # all-ones mask
    "cu_seqlens_and_all_ones_mask": {"batch": "083-fla-gdn-cu-seqlens-all-ones-mask.json", "shape": [1, 9],
                                     "attention_mask": [[1] * 9], "cu_seqlens": [0, 3, 5, 9]},
    # the caller's cu_seqlens alone
    "cu_seqlens": {"batch": "084-fla-gdn-cu-seqlens.json", "shape": [1, 9], "cu_seqlens": [0, 3, 5, 9]},
    # a right-padded mask alone
    "padding_mask": {"batch": "085-fla-gdn-padding-mask.json", "shape": [2, 6],
                     "attention_mask": [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]]},
}


def batch_for(name, spec):
    B, T = spec["shape"]
    batch = {"batch_size": B, "query_length": T}
    if "attention_mask" in spec:
        batch = {"attention_mask": {"values": spec["attention_mask"]}}
    layer = {"kind": "gated_deltanet", "implementation": "fla", "attention_mask": "attention_mask" in spec}
    if "cu_seqlens" in spec:
        layer["cu_seqlens"] = spec["cu_seqlens"]
    return {
        "format": "attn-doctor/batch@1",
        "name": "fla-gdn-" + name.replace("_", "-"),
        "description": "FLA's GatedDeltaNet layer (fla/layers/gated_deltanet.py) called with "
                       + ("this attention mask" if "attention_mask" in spec else "no attention mask")
                       + (" and the caller's cu_seqlens" if "cu_seqlens" in spec else "")
                       + "; tools/parity/fla_layer.py, goldens tests/golden/fla-gdn-<release>.json.",
        "model": {"num_heads": LAYER["num_heads"], "num_kv_heads": LAYER["num_heads"], "head_dim": LAYER["head_dim"],
                  "hidden_size": LAYER["hidden_size"], "dtype": "fp32"},
        "batch": batch,
        "layers": [layer],
    }


def write_batches(batches_dir, dumps):
    scenario_goldens.write_batches(SCENARIOS, batch_for, batches_dir, dumps)


def run(run_python, python, fla_site, site_for, buildhelpers, golden_dir, batches_dir, dumps, cache, only=None):
    write_batches(batches_dir, dumps)

    def header(release, env):
        return {"format": "attn-doctor/golden-fla-layer@1", "library": "flash-linear-attention", "release": release,
                "command": f"python tools/parity/parity.py fla-layer --releases {release}",
                "transformers": TRANSFORMERS[release], "torch": env["torch"], "torch_device": "cpu",
                "python": env["python"], "loaded": "whole", "entry_point": "fla.layers.gated_deltanet.GatedDeltaNet.forward",
                "layer": LAYER, "stubs": [], "patches": env["patches"]}

    # packaging: fla/utils.py imports it
    scenario_goldens.write(
        "fla-gdn", RELEASES, only,
        scenario_goldens.recorder(run_python, "driver_fla_layer.py", cache, "fla-gdn",
                                  lambda r: [fla_site(r), buildhelpers, site_for(TRANSFORMERS[r])],
                                  lambda r: python),
        header, {name: spec["batch"] for name, spec in SCENARIOS.items()}, golden_dir, dumps)
