"""The oracle's hang watchdog (tools/oracle/runner.py): a case process killed while a pass it
announced had not returned is recorded as that pass hanging; one killed elsewhere stays
"not measured"; the combination rule treats hang as loud. Runs without a GPU or torch."""

import os
import sys
import unittest
from pathlib import Path

ORACLE = Path(__file__).resolve().parent.parent / "tools" / "oracle"
sys.path.insert(0, str(ORACLE))

import outcome  # noqa: E402
import runner  # noqa: E402


class Watchdog(unittest.TestCase):
    def spawn(self, script, timeout=2.0):
        return runner.Runner._spawn(None, [sys.executable, "-c", script], timeout, dict(os.environ))

    def test_a_pass_that_never_returns_is_a_hang(self):
        script = ("import time\nprint('ORACLE-ENTER forward 1.0', flush=True)\nprint('ORACLE-LEAVE forward', flush=True)\n"
                  "print(f'ORACLE-ENTER backward {time.time():.3f}', flush=True)\ntime.sleep(60)\n")
        code, stdout, _, timed_out = self.spawn(script)
        self.assertTrue(timed_out)
        self.assertIsNone(code)
        name, entered = runner.entered_pass(stdout)
        self.assertEqual(name, "backward")
        self.assertGreater(entered, 1.0)
        rec = runner.hang_record("c", "b.json", "backward", 2.0)
        self.assertEqual(rec["backward"]["outcome"], "hang")
        self.assertNotIn("outcome", rec["forward"])

    def test_a_slow_harness_outside_any_pass_is_not_a_hang(self):
        code, stdout, _, timed_out = self.spawn("import time\nprint('loading', flush=True)\ntime.sleep(60)\n")
        self.assertTrue(timed_out)
        self.assertIsNone(runner.entered_pass(stdout))
        code, stdout, _, timed_out = self.spawn(
            "print('ORACLE-ENTER forward 1.0', flush=True)\nprint('ORACLE-LEAVE forward', flush=True)\n")
        self.assertFalse(timed_out)
        self.assertIsNone(runner.entered_pass(stdout))

    def test_hang_is_loud_in_the_combination_rule(self):
        self.assertEqual(outcome.combine("wrong_output", "hang", True), "hang")
        self.assertEqual(outcome.combine("hang", None, False), "hang")
        self.assertEqual(outcome.combine("ok", "hang", False), "ok")


if __name__ == "__main__":
    unittest.main()
