"""docs/backend-catch.md's generated table is what bench/ops_catch_table.py makes from the
committed runs (the CPU twin's rows and the H100 run's) and the oracle's current goldens, and
it misses no silent oracle case on either backend (every out_of_bounds,
wrong_output and wrong_gradient outcome the oracle measured is caught).

Needs torch and the built extension (the script imports attn_doctor.ops); skipped otherwise."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from .support import torch_skip_reason

WHY = torch_skip_reason(transformers_needed=False)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "backend-catch.md")
CPU_ROWS = os.path.join(ROOT, "bench", "results", "ops-catch-cpu-2026-11-27.json")
GPU_ROWS = os.path.join(ROOT, "bench", "results", "ops-h100-2026-11-27b", "ops-catch.json")


@unittest.skipIf(WHY is not None, WHY or "")
class CatchTableTest(unittest.TestCase):
    def test_table_is_current_and_misses_nothing(self):
        with tempfile.TemporaryDirectory() as out:
            copy = os.path.join(out, "backend-catch.md")
            shutil.copy(DOC, copy)
            proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "ops_catch_table.py"), "--rows-json",
                                   CPU_ROWS, "--gpu-json", GPU_ROWS, "--markdown", copy], capture_output=True,
                                  text=True, timeout=300, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                      [os.path.join(ROOT, "python")] + sys.path)))
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            with open(copy) as f:
                made = f.read()
        with open(DOC) as f:
            self.assertEqual(made, f.read(), "docs/backend-catch.md is not what the committed runs give: regenerate it")
        body = made[made.index("<!-- BEGIN GENERATED: bench/ops_catch_table.py -->"):]
        silent = re.search(r"silent outcomes \(out_of_bounds, wrong_output, wrong_gradient\): (\d+), missed: (\d+)", body)
        self.assertIsNotNone(silent)
        self.assertGreater(int(silent.group(1)), 0)
        self.assertEqual(silent.group(2), "0", body[:400])
        h100 = re.search(r"On the H100 .*?missed: (\d+)", body)
        self.assertIsNotNone(h100)
        self.assertEqual(h100.group(1), "0", h100.group(0))


if __name__ == "__main__":
    unittest.main()
