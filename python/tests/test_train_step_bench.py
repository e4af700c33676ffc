"""bench/gpu/train_step_gpu.py on the CPU twin (--device cpu --tiny): the packed batch and its
dense twin give the same loss (the documents' first tokens are not targets, so both cover the
same predictions), every variant is timed, and the ratio to the fastest is computed. The GPU
run of the same script is bench/results/train-step-h100-2026-11-27.

Needs torch and transformers (>= 5) and the built extension; skipped otherwise, saying why."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from attn_doctor import diagnosis

from .support import torch_skip_reason

WHY = torch_skip_reason()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the script runs in a child process: it imports the same attn_doctor package as this test
# (the unittest runner may have found it through the working directory, not PYTHONPATH)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(diagnosis.__file__)))
CHILD_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    p for p in (PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")) if p))


@unittest.skipIf(WHY is not None, WHY or "")
class TrainStepBenchTest(unittest.TestCase):
    def test_tiny_step_on_the_cpu_twin(self):
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench/gpu/train_step_gpu.py"), "--device", "cpu",
                                   "--tiny", "--sizes", "8192", "--head-dims", "64", "--repeats", "1", "--out", out],
                                  capture_output=True, text=True, timeout=600, env=CHILD_ENV)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            result = json.load(open(os.path.join(out, "train-step.json")))
        (run,) = result["runs"]
        self.assertEqual((run["tokens"], run["equal_length"], run["equal_rows"]), (128, 32, 4))
        v = run["variants"]
        self.assertEqual(set(v), {"random/attn_doctor", "equal/attn_doctor", "equal/sdpa"})
        for row in v.values():
            self.assertNotIn("error", row)
            self.assertGreater(row["step_median_ms"], 0)
            self.assertGreater(row["attention_share"], 0)
        # the packed row of equal documents and the dense (4, 32) batch: the same predictions
        # (6e-5 apart; 2.4e-3 when the documents' first tokens are left as targets)
        self.assertAlmostEqual(v["equal/attn_doctor"]["loss"], v["equal/sdpa"]["loss"], delta=5e-4)
        # a packed row of random documents is another batch: another loss
        self.assertNotAlmostEqual(v["random/attn_doctor"]["loss"], v["equal/attn_doctor"]["loss"], delta=1e-4)
        self.assertGreater(run["random_documents"], 1)
        ratio = run["equal_ratio"]
        self.assertEqual(ratio["fastest"], "sdpa")
        self.assertAlmostEqual(ratio["ratio"], ratio["attn_doctor_ms"] / ratio["fastest_ms"])


if __name__ == "__main__":
    unittest.main()
