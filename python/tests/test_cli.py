"""`python -m attn_doctor.capture -- python script.py`: the script runs in a child process
with the hooks installed by the bootstrap sitecustomize; the parent reports and exits with
the script's status."""
import json
import os
import subprocess
import sys
import textwrap
import unittest

from .support import FAKEPKGS, temp_dir

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the capture diagnoses through the extension, else the binary
from attn_doctor import _binary, diagnosis  # noqa: E402
CAN_CHECK = diagnosis._native is not None or _binary.find() is not None

SCRIPT = textwrap.dedent("""
    import sys
    from faketensor import FakeTensor
    from transformers.modeling_utils import FakeAttention, FakeConfig

    attn = FakeAttention(FakeConfig(model_type="llama", hidden_size=64), layer_idx=0)
    def qkv(lk):
        return (FakeTensor(shape=(2, 4, 1, 16), dtype="bfloat16", device="cuda:0"),
                FakeTensor(shape=(2, 2, lk, 16), dtype="bfloat16", device="cuda:0"),
                FakeTensor(shape=(2, 2, lk, 16), dtype="bfloat16", device="cuda:0"))
    attn(*qkv(8), FakeTensor([[1] * 8, [0] + [1] * 7]))          # call 1: fine
    if sys.argv[1] == "fail":
        attn(*qkv(8), FakeTensor([[1] * 9, [0, 0] + [1] * 7]))   # call 2: mask wider than keys
    sys.exit(int(sys.argv[2]))
""")


class CliTest(unittest.TestCase):
    def run_capture(self, folder, *args, script_args=("ok", "0")):
        script = os.path.join(folder, "train.py")
        with open(script, "w") as fh:
            fh.write(SCRIPT)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, FAKEPKGS])
        env.pop("ATTN_DOCTOR_CAPTURE", None)
        env.pop("CUDA_LAUNCH_BLOCKING", None)
        return subprocess.run(
            [sys.executable, "-m", "attn_doctor.capture", "--out", os.path.join(folder, "cap"),
             *args, "--", sys.executable, script, *script_args],
            cwd=folder, env=env, capture_output=True, text=True, timeout=60)

    def test_failure_is_written_and_the_check_command_printed(self):
        with temp_dir() as d:
            proc = self.run_capture(d, script_args=("fail", "0"))
            self.assertEqual(proc.returncode, 1, proc.stderr)      # the script's own status
            self.assertIn("Traceback", proc.stderr)
            self.assertIn("RuntimeError: CUDA error: device-side assert triggered", proc.stderr)
            self.assertIn("attn-doctor: call 2 into transformers._flash_attention_forward, layer 0 "
                          "raised RuntimeError", proc.stderr)
            self.assertTrue(proc.stderr.rstrip().endswith(
                "attn-doctor: the whole report: attn-doctor check cap/call-000002.json"), proc.stderr)
            if CAN_CHECK:  # the diagnosis itself, not only a command to run
                self.assertIn("attn-doctor: wrote cap/call-000002.json; its diagnosis:", proc.stderr)
                self.assertIn("  first violation: mask.kv_length", proc.stderr)
                self.assertIn("  verdict: VIOLATION", proc.stderr)
            with open(os.path.join(d, "cap", "call-000002.json")) as fh:
                doc = json.load(fh)
            self.assertEqual(doc["batch"]["attention_mask"],
                             {"lengths": [9, 7], "width": 9, "padding_side": "left"})
            self.assertEqual(doc["batch"]["kv_length"], 8)
            self.assertEqual(sorted(os.listdir(os.path.join(d, "cap"))),
                             ["call-000002.json", "manifest.jsonl"])

    @unittest.skipUnless(CAN_CHECK, "neither attn_doctor._native nor the attn-doctor binary is here")
    def test_check_diagnoses_every_file(self):
        with temp_dir() as d:
            proc = self.run_capture(d, "--every", "--check")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("attn-doctor: call 1 into transformers._flash_attention_forward: cap/call-000001.json",
                          proc.stderr)
            self.assertIn("  verdict: OK", proc.stderr)

    def test_status_passes_through_and_nothing_is_written_without_failure(self):
        with temp_dir() as d:
            proc = self.run_capture(d, script_args=("ok", "3"))
            self.assertEqual(proc.returncode, 3)
            self.assertIn("no attention call raised (exit status 3)", proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "cap", "manifest.jsonl")))

    def test_call_n(self):
        with temp_dir() as d:
            proc = self.run_capture(d, "--call", "1", "--attn-doctor", "./build/app/attn-doctor")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("wrote 1 batch file(s)", proc.stderr)
            self.assertIn("./build/app/attn-doctor check cap/call-000001.json", proc.stderr)
            with open(os.path.join(d, "cap", "manifest.jsonl")) as fh:
                [entry] = [json.loads(line) for line in fh]
            self.assertEqual((entry["call"], entry["failed"]), (1, False))

    def test_usage_error(self):
        proc = subprocess.run([sys.executable, "-m", "attn_doctor.capture", "--every"],
                              env=dict(os.environ, PYTHONPATH=PYTHON_DIR),
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("give the command to run after --", proc.stderr)


if __name__ == "__main__":
    unittest.main()
