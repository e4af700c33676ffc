"""The guard, against the fake transformers / flash_attn packages (tests/fakepkgs) and fake
tensors: a call that breaks an invariant raises VarlenError before the kernel runs, healthy
calls go through unchanged, verdicts are reused, warnings are logged once, device tensors
are not read without sync, and `python -m attn_doctor.guard` guards a whole script. Needs
the extension (attn_doctor._native); skipped, with the reason, without it."""
import json
import logging
import os
import subprocess
import sys
import textwrap
import unittest

import attn_doctor
from attn_doctor import diagnosis

from .support import FAKEPKGS, fake_libraries, temp_dir
from .test_hooks import ModelCalls

NEEDS_NATIVE = unittest.skipIf(diagnosis._native is None,
                               "attn_doctor._native is not built for this Python "
                               "(pip install . builds it; a CMake build with nanobind puts it in "
                               "build/python/attn_doctor: set ATTN_DOCTOR_NATIVE_DIR)")


def packed(total, cu, device="cpu", dtype="bfloat16", cu_dtype="int32"):
    from faketensor import FakeTensor
    q = FakeTensor(shape=(total, 8, 64), dtype=dtype, device=device)
    return q, FakeTensor(cu, dtype=cu_dtype, device=device)


@NEEDS_NATIVE
class GuardTest(unittest.TestCase):
    def test_an_overrun_raises_before_the_kernel_runs(self):
        with fake_libraries():
            import flash_attn
            import flash_attn.flash_attn_interface as fai
            q, cu = packed(387, [0, 100, 250, 400])
            with attn_doctor.guard() as guard:
                with self.assertRaises(attn_doctor.VarlenError) as caught:
                    flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 150, 150, causal=True)
            self.assertEqual(fai.CALLS, [])  # the kernel never ran
            err = caught.exception
            self.assertEqual(err.id, "cu_seqlens.total")
            self.assertEqual(err.entry, "flash_attn.flash_attn_varlen_func")
            self.assertIn("cu_seqlens_q[-1] is 400 but q has 387 rows", str(err))
            self.assertIn("fix: ", str(err))
            self.assertEqual(err.report["status"], "violation")
            self.assertEqual(err.report["first_violation"]["id"], "cu_seqlens.total")
            self.assertTrue(err.fix)
            self.assertEqual(err.batch["varlen"]["cu_seqlens_q"], [0, 100, 250, 400])
            self.assertEqual(guard.stats["raised"], 1)
            # the saved batch file replays to the same first violation
            with temp_dir() as out:
                path = err.save(os.path.join(out, "call.json"))
                self.assertEqual(attn_doctor.check(path, backend="none")["first_violation"]["id"],
                                 "cu_seqlens.total")

    def test_a_healthy_call_goes_through_and_its_verdict_is_reused(self):
        with fake_libraries():
            import flash_attn
            import flash_attn.flash_attn_interface as fai
            q, cu = packed(387, [0, 100, 250, 387])
            with attn_doctor.guard() as guard:
                for _ in range(3):
                    out = flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 150, 150, causal=True)
                    self.assertIs(out, fai.LAST_OUTPUT)
            self.assertEqual(len(fai.CALLS), 3)
            self.assertEqual(guard.stats["checked"], 1)
            self.assertEqual(guard.stats["cached"], 2)
            self.assertEqual(cu.host_copies, 1 + 3)   # the guard's one read, and the fake kernel's own
            self.assertEqual(q.host_copies, 0)    # q/k/v are never copied

    def test_a_changed_index_tensor_is_checked_again(self):
        with fake_libraries():
            import flash_attn
            q, cu = packed(387, [0, 100, 250, 387])
            with attn_doctor.guard() as guard:
                flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 150, 150, causal=True)
                cu._flat[-1] = 400   # an in-place write bumps the version, as torch does
                cu._version += 1
                with self.assertRaises(attn_doctor.VarlenError):
                    flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 150, 150, causal=True)
            self.assertEqual(guard.stats["checked"], 2)

    def test_a_mask_wider_than_the_keys_is_stopped_at_the_transformers_call(self):
        with fake_libraries():
            from faketensor import FakeTensor
            import transformers.modeling_utils  # noqa: F401
            model = ModelCalls()
            mask = FakeTensor([[1] * 9, [0, 0, 0] + [1] * 6], device="cuda:0")
            with attn_doctor.guard():
                with self.assertRaises(attn_doctor.VarlenError) as caught:
                    model.forward(mask, lq=6, lk=6, b=2)
            err = caught.exception
            self.assertEqual(err.entry, "transformers._flash_attention_forward")
            ids = [v["id"] for v in err.report["violations"]]
            self.assertIn("mask.kv_length", ids)
            self.assertEqual(err.batch["batch"]["attention_mask"]["width"], 9)

    def test_layers_share_one_check_and_nested_kernel_calls_are_covered_by_it(self):
        with fake_libraries():
            from faketensor import FakeTensor
            import transformers.modeling_utils  # noqa: F401
            import flash_attn.flash_attn_interface as fai
            model = ModelCalls()
            mask = FakeTensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]], device="cuda:0")
            with attn_doctor.guard() as guard:
                model.forward(mask, lq=6, lk=6, b=2)
            self.assertEqual(len(fai.CALLS), 2)
            self.assertEqual((guard.stats["calls"], guard.stats["checked"], guard.stats["cached"]), (2, 1, 1))
            self.assertEqual(mask.host_copies, 1 + 2)   # the guard once, the fake release per layer
            with attn_doctor.guard(nested=True) as guard:
                model.forward(mask, lq=6, lk=6, b=2)
            self.assertEqual(guard.stats["calls"], 4)  # each layer's kernel call too

    def test_warnings_are_logged_once_and_the_call_goes_on(self):
        with fake_libraries():
            from faketensor import FakeTensor
            import flash_attn
            import flash_attn.flash_attn_interface as fai
            q, cu = packed(12, [0, 5, 12])
            with attn_doctor.guard(), self.assertLogs("attn_doctor.guard", logging.WARNING) as logs:
                for _ in range(2):
                    # a 0-d tensor max_seqlen (transformers 4.44-4.53's packed path): FA2 converts it
                    flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, FakeTensor(7, shape=()),
                                                      FakeTensor(7, shape=()), causal=True)
            self.assertEqual(len(fai.CALLS), 2)
            self.assertEqual(len(logs.records), 1)
            self.assertIn("max_seqlen.type", logs.output[0])

    def test_an_advisory_the_call_matches_is_logged_once_and_the_call_goes_on(self):
        # transformers 4.43.0 - 4.55.4 pass a sliding window W as window_size=(W, W): a valid
        # call the kernel (or the checked ops under --kernels) computes as told, W + 1 keys per
        # query; the guard's host check of the transformers call names it (TRANSFORMERS-2025-002)
        for release, said in (("4.54.1", True), ("4.56.2", False)):
            with self.subTest(release=release), fake_libraries():
                from faketensor import FakeTensor
                import transformers
                import transformers.modeling_utils  # noqa: F401
                import flash_attn.flash_attn_interface as fai
                transformers.__version__ = release
                model = ModelCalls(sliding_window=4, model_type="mistral")
                mask = FakeTensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]], device="cuda:0")
                with attn_doctor.guard(), self.assertLogs("attn_doctor.guard", logging.WARNING) as logs:
                    for _ in range(2):
                        model.forward(mask, lq=6, lk=6, b=2)
                    logging.getLogger("attn_doctor.guard").warning("end")  # assertLogs needs one record
                self.assertEqual(len(fai.CALLS), 4)  # every layer's call ran
                advised = [line for line in logs.output if "TRANSFORMERS-2025-002" in line]
                if said:
                    self.assertEqual(len(advised), 1, logs.output)
                    self.assertIn("transformers 4.54.1 has this bug for this call", advised[0])
                    self.assertIn("fixed in 4.56.0", advised[0])
                else:
                    self.assertEqual(advised, [])

    def test_without_sync_device_tensors_are_not_read(self):
        with fake_libraries():
            import flash_attn
            import flash_attn.flash_attn_interface as fai
            with attn_doctor.guard(sync=False) as guard:
                # a fp32 q needs no index values: stopped
                q32, cu32 = packed(387, [0, 100, 250, 387], device="cuda:0", dtype="float32")
                with self.assertRaises(attn_doctor.VarlenError) as caught:
                    flash_attn.flash_attn_varlen_func(q32, q32, q32, cu32, cu32, 150, 150)
                self.assertEqual(caught.exception.id, "input.dtype")
                self.assertIn("only the input invariants were checked", " ".join(caught.exception.report["notes"]))
                self.assertEqual(cu32.host_copies, 0)
                self.assertEqual(fai.CALLS, [])
                # an overrun needs cu_seqlens' values: not read, so it reaches the kernel
                q, cu = packed(387, [0, 100, 250, 400], device="cuda:0")
                with self.assertRaisesRegex(RuntimeError, "illegal memory access"):
                    flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 150, 150, causal=True)
            self.assertEqual(guard.stats["metadata_only"], 2)
            # host tensors need no synchronisation: checked in full
            q, cu = packed(387, [0, 100, 250, 400], device="cpu")
            with attn_doctor.guard(sync=False):
                with self.assertRaises(attn_doctor.VarlenError) as caught:
                    flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 150, 150, causal=True)
            self.assertEqual(caught.exception.id, "cu_seqlens.total")

    def test_guard_and_capture_together_write_the_stopped_call(self):
        with fake_libraries(), temp_dir() as out:
            import flash_attn
            q, cu = packed(387, [0, 100, 250, 400])
            with attn_doctor.capture(out, announce=False) as cap, attn_doctor.guard():
                with self.assertRaises(attn_doctor.VarlenError):
                    flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 150, 150, causal=True)
            self.assertEqual(len(cap.failures), 1)
            with open(cap.failures[0]) as fh:
                self.assertEqual(json.load(fh)["varlen"]["cu_seqlens_q"], [0, 100, 250, 400])

    def test_uninstall_restores_the_functions(self):
        with fake_libraries():
            import flash_attn
            original = flash_attn.flash_attn_varlen_func
            guard = attn_doctor.guard.install()
            self.assertIs(attn_doctor.guard.install(), guard)  # one per process
            self.assertIsNot(flash_attn.flash_attn_varlen_func, original)
            attn_doctor.guard.uninstall()
            self.assertIs(flash_attn.flash_attn_varlen_func, original)
            self.assertIsNone(attn_doctor.guard.active_guard())


@NEEDS_NATIVE
class GuardCommandTest(unittest.TestCase):
    def run_script(self, body, *options):
        with temp_dir() as work:
            script = os.path.join(work, "train.py")
            with open(script, "w") as fh:
                fh.write(textwrap.dedent(body))
            env = dict(os.environ)
            python_dir = os.path.dirname(os.path.dirname(os.path.abspath(attn_doctor.__file__)))
            env["PYTHONPATH"] = os.pathsep.join([FAKEPKGS, python_dir, env.get("PYTHONPATH", "")])
            return subprocess.run([sys.executable, "-m", "attn_doctor.guard", *options, "--",
                                   sys.executable, script], capture_output=True, text=True,
                                  env=env, cwd=work, timeout=120)

    BODY = """
        import flash_attn
        from faketensor import FakeTensor
        q = FakeTensor(shape=(387, 8, 64), dtype="bfloat16")
        cu = FakeTensor([0, 100, 250, LAST], dtype="int32")
        flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 150, 150, causal=True)
        print("kernel ran")
    """

    def test_a_bad_call_in_the_script_raises_varlen_error(self):
        proc = self.run_script(self.BODY.replace("LAST", "400"))
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("attn_doctor.guard.VarlenError", proc.stderr)
        self.assertIn("cu_seqlens.total", proc.stderr)
        self.assertNotIn("kernel ran", proc.stdout)

    def test_a_healthy_script_runs_unchanged(self):
        proc = self.run_script(self.BODY.replace("LAST", "387"), "--no-sync")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("kernel ran", proc.stdout)

    def test_usage_error(self):
        env = dict(os.environ)
        python_dir = os.path.dirname(os.path.dirname(os.path.abspath(attn_doctor.__file__)))
        env["PYTHONPATH"] = os.pathsep.join([python_dir, env.get("PYTHONPATH", "")])
        proc = subprocess.run([sys.executable, "-m", "attn_doctor.guard"], capture_output=True,
                              text=True, timeout=60, env=env)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("give the command to run after --", proc.stderr)


@NEEDS_NATIVE
class CheckTest(unittest.TestCase):
    # the repository (tests run from a copy against an installed package say where it is)
    ROOT = os.environ.get("ATTN_DOCTOR_SOURCE_DIR") or \
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def test_check_a_path_and_a_document(self):
        path = os.path.join(self.ROOT, "tests", "data", "cli", "cu-overrun.json")
        report = attn_doctor.check(path, backend="none")
        self.assertEqual(report["first_violation"]["id"], "cu_seqlens.total")
        with open(path) as fh:
            doc = json.load(fh)
        self.assertEqual(attn_doctor.check(doc, backend="cpu")["first_violation"]["id"], "cu_seqlens.total")
        doc["varlen"]["cu_seqlens_q"][-1] = doc["varlen"].get("total_q", 387)
        self.assertIn(attn_doctor.check(doc, backend="none")["status"], ("ok", "violation"))

    def test_invalid_input_names_the_path(self):
        with self.assertRaises(attn_doctor.InputError) as caught:
            attn_doctor.check({"format": "attn-doctor/batch@1", "model": {"num_heads": "eight"}})
        self.assertIn("/model/num_heads", str(caught.exception))
        self.assertIsInstance(caught.exception, ValueError)


if __name__ == "__main__":
    unittest.main()


@NEEDS_NATIVE
class TorchVarlenGuardTest(unittest.TestCase):
    def test_torch_varlen_attn_overrun_is_stopped(self):
        from .test_hooks import mock_module
        with fake_libraries():
            import fake_torch_varlen
            torch, varlen = fake_torch_varlen.modules("2.11.0")
            q, cu = packed(387, [0, 100, 250, 400], device="cuda:0")
            with mock_module("torch", torch), mock_module("torch.nn.attention.varlen", varlen):
                with attn_doctor.guard():
                    with self.assertRaises(attn_doctor.VarlenError) as caught:
                        varlen.varlen_attn(q, q, q, cu, cu, 150, 150, window_size=(-1, 0))
                    q2, cu2 = packed(387, [0, 100, 250, 387], device="cuda:0")
                    varlen.varlen_attn(q2, q2, q2, cu2, cu2, 150, 150, window_size=(-1, 0))
            self.assertEqual(fake_torch_varlen.CALLS, [("varlen_attn", (387, 8, 64))])  # only the healthy one ran
            fake_torch_varlen.CALLS.clear()
            err = caught.exception
            self.assertEqual(err.id, "cu_seqlens.total")
            self.assertEqual(err.entry, "torch.nn.attention.varlen.varlen_attn")
            self.assertEqual(err.batch["varlen"]["api"], "torch.varlen_attn")
