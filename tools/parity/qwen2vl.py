"""Qwen2-VL model-level goldens (parity.py qwen2vl): tests/golden/qwen2vl-forward-<release>.json
for every release with Qwen2-VL (4.45+). Scenarios padded / packed_2d / packed_3d are described by
batches 060 / 061 / 062 (architecture qwen2_vl); packed_4d has no batch (rank-4 ids)."""

import scenario_goldens

RELEASES = [
    "4.45.2", "4.46.3", "4.47.1", "4.48.3", "4.49.0", "4.50.3", "4.52.4", "4.53.0", "4.53.1", "4.53.3",
    "4.54.0", "4.54.1", "4.55.0", "4.55.4", "4.56.2", "4.57.6", "5.0.0", "5.4.0", "5.5.0", "5.14.1", "5.16.0",
    "5.20.0", "5.23.0",
    # model code without a golden before (releases.py: docs/spec/releases.md)
    "4.51.3", "5.1.0", "5.2.0", "5.3.0", "5.9.0", "5.17.0", "5.24.0",
]
BATCHES = {"padded": "060-qwen2vl-padded.json", "packed_2d": "061-qwen2vl-packed-2d.json",
           "packed_3d": "062-qwen2vl-packed-3d.json"}


def run(run_python, standin, python_for, site_for, golden_dir, dumps, cache, only=None):
    scenario_goldens.write(
        "qwen2vl-forward", RELEASES, only,
        scenario_goldens.recorder(run_python, "driver_qwen2vl.py", cache, "qwen2vl",
                                  lambda r: [standin("2.6.3"), site_for(r)], lambda r: python_for(r, "model")),
        scenario_goldens.transformers_header(
            "attn-doctor/golden-model@1",
            "transformers.Qwen2VLForConditionalGeneration.forward (text only, 1 layer, random init)"),
        BATCHES, golden_dir, dumps)
