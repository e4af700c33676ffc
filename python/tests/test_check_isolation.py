"""attn_doctor.check() on hostile input: encodings and file names that are not UTF-8 give
InputError or a report (never UnicodeDecodeError or TypeError), and a check that would run
for minutes is stopped at its time limit in a child process while the caller goes on."""
import json
import os
import resource
import time
import unittest

import attn_doctor
from attn_doctor import _binary, diagnosis

from .support import temp_dir

CAN_CHECK = diagnosis._native is not None or _binary.find() is not None
ROOT = os.environ.get("ATTN_DOCTOR_SOURCE_DIR") or \
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OVERRUN = os.path.join(ROOT, "tests", "data", "cli", "cu-overrun.json")

# One causal sequence of 16384 tokens, 8 heads of 128: the CPU backend's attention and
# reference over every row (the budget does not let it sample) are ~10^11 multiply-adds
# each, minutes on one core.
SLOW = {"format": "attn-doctor/batch@1", "name": "slow",
        "model": {"num_heads": 8, "head_dim": 128, "causal": True},
        "varlen": {"cu_seqlens_q": [0, 16384], "max_seqlen_q": 16384, "total_q": 16384}}


def _still_running(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@unittest.skipUnless(CAN_CHECK, "neither attn_doctor._native nor the attn-doctor binary is here")
class HostileInputTest(unittest.TestCase):
    def test_utf16_batch_is_an_input_error(self):
        with temp_dir() as d:
            path = os.path.join(d, "utf16.json")
            with open(OVERRUN) as src, open(path, "w", encoding="utf-16") as dst:
                dst.write(src.read())
            with self.assertRaises(attn_doctor.InputError) as caught:
                attn_doctor.check(path, backend="none")
            self.assertIn("utf16.json", str(caught.exception))
            self.assertIsInstance(caught.exception, ValueError)

    def test_file_name_that_is_not_utf8(self):
        with temp_dir() as d:
            raw = os.path.join(os.fsencode(d), b"caf\xe9-\xff.json")
            with open(OVERRUN, "rb") as src, open(raw, "wb") as dst:
                dst.write(src.read())
            for path in (raw, os.fsdecode(raw)):  # bytes, and str with surrogate escapes
                report = attn_doctor.check(path, backend="none")
                self.assertEqual(report["first_violation"]["id"], "cu_seqlens.total")
            code, text = diagnosis.render(os.fsdecode(raw), format="text", backend="none")
            self.assertEqual(code, 1)
            self.assertIn("caf\ufffd-\ufffd.json", text)
            missing = os.path.join(os.fsencode(d), b"gone-\xff.json")
            with self.assertRaises(attn_doctor.InputError) as caught:
                attn_doctor.check(missing, backend="none")
            # error messages quote input through one escaping (lib/util/text.hpp escape_text):
            # a byte that is not UTF-8 is written \xff
            self.assertIn("gone-\\xff.json", str(caught.exception))


@unittest.skipUnless(CAN_CHECK, "neither attn_doctor._native nor the attn-doctor binary is here")
class TimeLimitTest(unittest.TestCase):
    def test_a_long_check_is_stopped_at_its_time_limit(self):
        with temp_dir() as d:
            path = os.path.join(d, "slow.json")
            with open(path, "w") as fh:
                json.dump(SLOW, fh)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            start = time.monotonic()
            with self.assertRaises(attn_doctor.CheckTimeout) as caught:
                attn_doctor.check(path, backend="cpu", budget=10**13, timeout=1.0)
            elapsed = time.monotonic() - start
            self.assertLess(elapsed, 30)  # generous: the limit is 1 s, the check minutes
            self.assertIsInstance(caught.exception, TimeoutError)
            self.assertIsInstance(caught.exception, RuntimeError)
            self.assertIn("time limit of 1 s", str(caught.exception))
            # the check's memory was the child's, not this process's
            grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
            self.assertLess(grown_kib, 64 * 1024)
            # and the same batch, static checks only, still answers at once
            self.assertEqual(attn_doctor.check(path, backend="none", timeout=60)["status"], "ok")

    @unittest.skipIf(diagnosis._native is None, "the child process runs the extension")
    def test_the_child_is_gone_after_the_limit(self):
        with temp_dir() as d:
            path = os.path.join(d, "slow.json")
            with open(path, "w") as fh:
                json.dump(SLOW, fh)
            started = []
            real_popen = diagnosis.subprocess.Popen

            def popen(*args, **kwargs):
                child = real_popen(*args, **kwargs)
                started.append(child.pid)
                return child

            diagnosis.subprocess.Popen = popen
            try:
                with self.assertRaises(attn_doctor.CheckTimeout):
                    attn_doctor.check(path, backend="cpu", budget=10**13, timeout=0.5)
            finally:
                diagnosis.subprocess.Popen = real_popen
            self.assertEqual(len(started), 1)
            self.assertFalse(_still_running(started[0]))

    def test_a_check_within_the_limit_is_unchanged(self):
        report = attn_doctor.check(OVERRUN, backend="none", timeout=60)
        self.assertEqual(report["first_violation"]["id"], "cu_seqlens.total")
        unlimited = attn_doctor.check(OVERRUN, backend="none", timeout=None)
        self.assertEqual(unlimited["first_violation"], report["first_violation"])


if __name__ == "__main__":
    unittest.main()
