"""The guard's verdict is `attn-doctor check --backend none`'s: for every repro case, with and
without --strict, the extension's guard_check (what attn_doctor.guard() runs per call) and
the binary agree on the exit code, the warnings, and (for a call the guard stops) the whole
report, stage timings aside. Needs the extension and the binary; skipped, with the reason,
without either."""
import glob
import json
import os
import subprocess
import unittest

from attn_doctor import _binary, diagnosis

ROOT = os.environ.get("ATTN_DOCTOR_SOURCE_DIR") or \
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = sorted(glob.glob(os.path.join(ROOT, "repro_cases", "*.json")))
BINARY = _binary.find()


def without_timings(report):
    for stage in report.get("stages", []):
        stage.pop("ms", None)
    return report


@unittest.skipIf(diagnosis._native is None, "attn_doctor._native is not built for this Python "
                 "(a CMake build with nanobind puts it in build/python/attn_doctor: set ATTN_DOCTOR_NATIVE_DIR)")
@unittest.skipIf(BINARY is None, "the attn-doctor binary was not found (set ATTN_DOCTOR_BINARY)")
class GuardAgreesWithCliTest(unittest.TestCase):
    def test_every_repro_case(self):
        self.assertGreater(len(CASES), 50)
        stopped = warned = 0
        for path in CASES:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            for strict in (False, True):
                with self.subTest(case=os.path.basename(path), strict=strict):
                    cli = subprocess.run([BINARY, "check", path, "--backend", "none", "--format", "json"]
                                         + (["--strict"] if strict else []),
                                         capture_output=True, text=True, timeout=120)
                    self.assertIn(cli.returncode, (0, 1), cli.stderr)
                    report = without_timings(json.loads(cli.stdout))
                    result = diagnosis._native.guard_check(text, path, strict, False)
                    if result is None:
                        self.assertEqual(cli.returncode, 0)
                        self.assertEqual(report["violations"], [])
                        continue
                    errors, warnings, guard_report = result
                    self.assertEqual(cli.returncode, 1 if errors else 0)
                    self.assertEqual(errors, sum(1 for v in report["violations"]
                                                 if strict or v["severity"] == "error"))
                    self.assertEqual(warnings, [] if strict else
                                     [(v["id"], v["message"]) for v in report["violations"]
                                      if v["severity"] == "warning"])
                    if errors:
                        stopped += 1
                        self.assertEqual(without_timings(json.loads(guard_report)), report)
                    else:
                        warned += 1
                        self.assertIsNone(guard_report)
        # the corpus has calls the guard stops and calls it lets through with a warning
        self.assertGreater(stopped, 0)
        self.assertGreater(warned, 0)


if __name__ == "__main__":
    unittest.main()
