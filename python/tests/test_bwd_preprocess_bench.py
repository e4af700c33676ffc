"""bench/gpu/bench_bwd_preprocess.py on the CPU twin (--device cpu): the training step's call
(GQA, causal, a packed row of documents) runs through attn_doctor.ops' backward, its gradients
agree with per-document SDPA in fp32, and the JSON names every shape. The GPU run times the
backward's small launches (bench/results/bwd-preprocess-2026-11-27).

Needs torch and the built extension; skipped otherwise, saying why."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from .support import torch_skip_reason

WHY = torch_skip_reason(transformers_needed=False)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@unittest.skipIf(WHY is not None, WHY or "")
class BwdPreprocessBenchTest(unittest.TestCase):
    def test_cpu_twin_call(self):
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "r.json")
            proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench/gpu/bench_bwd_preprocess.py"), "--device",
                                   "cpu", "--tokens", "256", "--head-dims", "64", "128", "--doc-min", "16",
                                   "--doc-max", "96", "--json", path], capture_output=True, text=True, timeout=600,
                                  env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                      [os.path.join(ROOT, "python")] + sys.path)))
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            with open(path) as f:
                result = json.load(f)
        rows = result["rows"]
        self.assertEqual([(r["head_dim"], r["tokens"], r["heads"], r["heads_k"]) for r in rows],
                         [(64, 256, 32, 4), (128, 256, 16, 4)])
        for r in rows:
            self.assertGreater(r["segments"], 1)
            self.assertLessEqual(r["max_seqlen"], 96)
            self.assertEqual(r["grad_reference"], "sdpa_fp32")
            self.assertLess(r["grad_rel_err"], 2e-2)
            self.assertNotIn("us", r)


if __name__ == "__main__":
    unittest.main()
