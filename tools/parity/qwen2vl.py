"""Qwen2-VL model-level goldens (parity.py qwen2vl): tests/golden/qwen2vl-forward-<release>.json
for every release with Qwen2-VL (4.45+). Scenarios padded / packed_2d / packed_3d are described by
batches 060 / 061 / 062 (architecture qwen2_vl); packed_4d has no batch (rank-4 ids)."""

import json

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
    for release in RELEASES:
        if only is not None and release not in only:
            continue
        out = cache / f"qwen2vl-{release}.json"
        run_python("driver_qwen2vl.py", ["--out", str(out)], [standin("2.6.3"), site_for(release)],
                   python=python_for(release, "model"))
        data = json.loads(out.read_text())
        env = data["environment"]
        golden = {
            "format": "attn-doctor/golden-model@1", "library": "transformers", "release": release,
            "torch": env["torch"], "torch_device": "cpu", "python": env["python"], "loaded": "whole",
            "entry_point": "transformers.Qwen2VLForConditionalGeneration.forward (text only, 1 layer, random init)",
            "stubs": [], "patches": env["patches"], "flash_attn_standin": env["flash_attn_standin"],
            "model_batches": BATCHES, "scenarios": data["scenarios"],
        }
        (golden_dir / f"qwen2vl-forward-{release}.json").write_text(dumps(golden) + "\n")
        print(f"wrote qwen2vl-forward-{release}.json")
