"""bench/gpu/attn_layer_profile.py on the CPU twin (--device cpu --tiny): every variant the CPU
has is timed and profiled, the attn_doctor variants' operator table holds the checked ops (and
SDPA's none of them). The GPU run of the same script is bench/results/attn-layer-h100-2026-11-28.

Needs torch and transformers (>= 5) and the built extension; skipped otherwise, saying why."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from .support import torch_skip_reason
from .test_train_step_bench import CHILD_ENV, ROOT

WHY = torch_skip_reason()


@unittest.skipIf(WHY is not None, WHY or "")
class AttnLayerProfileTest(unittest.TestCase):
    def test_tiny_layer_on_the_cpu_twin(self):
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench/gpu/attn_layer_profile.py"), "--device",
                                   "cpu", "--tiny", "--shapes", "64:8192", "--repeats", "1", "--profiled", "1",
                                   "--out", out], capture_output=True, text=True, timeout=600, env=CHILD_ENV)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            with open(os.path.join(out, "attn-layer-profile.json")) as f:
                result = json.load(f)
        runs = {r["variant"]: r for r in result["runs"]}
        # the CPU has no torch varlen_attn and no cuDNN: those variants are left out
        self.assertEqual(set(runs), {"attn_doctor", "attn_doctor/norows", "sdpa"})
        for variant, run in runs.items():
            self.assertEqual((run["head_dim"], run["tokens"]), (64, 128))
            self.assertGreater(run["fwd_ms"], 0)
            self.assertGreater(run["bwd_ms"], 0)
            names = [k["kernel"] for k in run["kernels"]]
            checked = {"attn_doctor::varlen_fwd", "attn_doctor::varlen_bwd"}
            if variant.startswith("attn_doctor"):
                self.assertTrue(checked <= set(names), names[:20])
            else:
                self.assertFalse(checked & set(names), names[:20])


if __name__ == "__main__":
    unittest.main()
