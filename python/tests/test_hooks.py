"""The hooks, against fake transformers / flash_attn / fla packages (tests/fakepkgs) and
fake tensors: what gets recorded, that calls are not changed, and that everything is
restored."""
import contextlib
import json
import os
import sys
import types
import unittest

import attn_doctor
from attn_doctor import _binary, diagnosis

from .support import fake_libraries, temp_dir

CAN_CHECK = diagnosis._native is not None or _binary.find() is not None


def read_json(path):
    with open(path) as fh:
        return json.load(fh)


def manifest(folder):
    with open(os.path.join(folder, "manifest.jsonl")) as fh:
        return [json.loads(line) for line in fh]


@contextlib.contextmanager
def mock_module(name, module):
    """sys.modules[name] = module for the duration (the previous entry put back)."""
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        yield
    finally:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous


class ModelCalls:
    """A two-layer 'model' over the fake transformers: q (B, H, L, D) as models hold it."""

    def __init__(self, sliding_window=None, softcap=None, model_type="gemma2"):
        from transformers.modeling_utils import FakeAttention, FakeConfig
        self.config = FakeConfig(model_type=model_type, hidden_size=256, num_attention_heads=8,
                                 num_key_value_heads=2, pad_token_id=1)
        self.layers = [FakeAttention(self.config, 0, sliding_window, softcap),
                       FakeAttention(self.config, 1)]

    @staticmethod
    def qkv(b, lq, lk, device="cuda:0"):
        from faketensor import FakeTensor
        q = FakeTensor(shape=(b, 8, lq, 32), dtype="bfloat16", device=device)
        k = FakeTensor(shape=(b, 2, lk, 32), dtype="bfloat16", device=device)
        v = FakeTensor(shape=(b, 2, lk, 32), dtype="bfloat16", device=device)
        return q, k, v

    def forward(self, mask=None, lq=6, lk=6, b=2, **kwargs):
        q, k, v = self.qkv(b, lq, lk)
        return [layer(q, k, v, mask, **kwargs) for layer in self.layers], (q, k, v)


class TransformersEntryTest(unittest.TestCase):
    def test_every_call_records_what_the_framework_held(self):
        with fake_libraries(), temp_dir() as out:
            from faketensor import FakeTensor
            import transformers.modeling_utils  # noqa: F401  (loaded before install)
            model = ModelCalls(sliding_window=4, softcap=50.0)
            mask = FakeTensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]], device="cuda:0")
            pos = FakeTensor([[1, 1, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5]], device="cuda:0")
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                (results, (q, k, v)) = model.forward(mask, position_ids=pos)
            self.assertEqual([os.path.basename(f) for f in cap.files],
                             ["call-000001.json", "call-000002.json"])
            doc = read_json(cap.files[0])
            self.assertEqual(doc["format"], "attn-doctor/batch@1")
            self.assertEqual(doc["name"], "gemma2-layer0-call1")
            self.assertEqual(doc["environment"], {"transformers": "5.17.0", "flash_attn": "2.6.3",
                                                  "device": "cuda:0"} | {
                k: v for k, v in doc["environment"].items() if k in ("torch", "triton")})
            self.assertEqual(doc["model"], {"num_heads": 8, "num_kv_heads": 2, "head_dim": 32,
                                            "hidden_size": 256, "dtype": "bf16", "causal": True,
                                            "sliding_window": 4, "softcap": 50.0,
                                            "architecture": "gemma2"})
            self.assertEqual(doc["batch"], {
                "attention_mask": {"lengths": [4, 6], "width": 6, "padding_side": "left"},
                "position_ids": {"from": "mask"}, "query_length": 6, "kv_length": 6})
            self.assertNotIn("varlen", doc)  # the replay derives it; the manifest keeps it
            second = read_json(cap.files[1])["model"]
            self.assertNotIn("sliding_window", second)
            entries = manifest(out)
            self.assertEqual([e["call"] for e in entries], [1, 2])
            self.assertEqual(entries[0]["layer_idx"], 0)
            self.assertFalse(entries[0]["failed"])
            self.assertEqual(entries[0]["observed"], [{
                "entry": "flash_attn.flash_attn_varlen_func", "cu_seqlens_q": [0, 4, 10],
                "cu_seqlens_k": [0, 4, 10], "max_seqlen_q": 6, "max_seqlen_k": 6,
                "total_q": 10, "total_k": 10, "cu_seqlens_q_dtype": "int32",
                "cu_seqlens_k_dtype": "int32", "causal": True, "window_size": [3, 3],
                "softcap": 50.0}])
            # results pass through unchanged; q/k/v never reached the host
            import flash_attn.flash_attn_interface as fai
            self.assertIs(results[1][0], fai.LAST_OUTPUT)
            self.assertEqual((q.host_copies, k.host_copies, v.host_copies), (0, 0, 0))
            # capture copied the mask once for both layers (host cache); the fake transformers
            # reads it once per layer itself
            self.assertEqual(mask.host_copies, 1 + 2)

    def test_decode_and_explicit_kwargs(self):
        with fake_libraries(), temp_dir() as out:
            from faketensor import FakeTensor
            import transformers.modeling_utils  # noqa: F401
            model = ModelCalls(model_type="qwen2_vl_text")
            cu = FakeTensor([0, 3, 7], dtype="int64", device="cpu")
            with attn_doctor.capture(out, call=1, announce=False) as cap:
                model.forward(None, lq=7, lk=7, b=1, cu_seq_lens_q=cu, cu_seq_lens_k=cu,
                              max_length_q=4, max_length_k=FakeTensor(4, shape=()))
            self.assertEqual(len(cap.files), 1)
            doc = read_json(cap.files[0])
            self.assertEqual(doc["model"]["architecture"], "qwen2_vl")
            self.assertEqual(doc["batch"], {
                "query_length": 7, "kv_length": 7, "batch_size": 1,
                "flash_kwargs": {"cu_seq_lens_q": [0, 3, 7], "cu_seq_lens_k": [0, 3, 7],
                                 "max_length_q": 4, "max_length_k": 4}})
            self.assertEqual(doc["tensors"], {"cu_seqlens_q": {"dtype": "int64", "device": "cpu"},
                                              "cu_seqlens_k": {"dtype": "int64", "device": "cpu"}})

    def test_packed_position_ids_and_roberta_origin(self):
        with fake_libraries(), temp_dir() as out:
            from faketensor import FakeTensor
            import transformers.modeling_utils  # noqa: F401
            model = ModelCalls(model_type="roberta")
            pos = FakeTensor([[2, 3, 4, 2, 3]])
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                model.forward(None, lq=5, lk=5, b=1, position_ids=pos)
            doc = read_json(cap.files[0])
            self.assertEqual(doc["model"]["position_origin"], 2)
            self.assertEqual(doc["batch"]["position_ids"], {"from": "packed", "lengths": [3, 2]})
            self.assertEqual(manifest(out)[0]["observed"][0]["cu_seqlens_q"], [0, 3, 5])
            self.assertEqual(manifest(out)[0]["observed"][0]["max_seqlen_q"], {"tensor": 3})


class FailureTest(unittest.TestCase):
    def test_first_failure_is_written_and_the_exception_is_unchanged(self):
        with fake_libraries(), temp_dir() as out:
            from faketensor import FakeTensor
            import transformers.modeling_utils  # noqa: F401
            model = ModelCalls()
            good = FakeTensor([[1] * 8, [1] * 8])
            wide = FakeTensor([[1] * 9, [0] + [1] * 8])   # 9 columns, keys have 8
            with attn_doctor.capture(out, announce=False) as cap:
                model.forward(good, lq=8, lk=8)
                caught = []
                for _ in range(2):
                    try:
                        model.forward(wide, lq=1, lk=8)
                    except RuntimeError as exc:
                        caught.append(exc)
            self.assertEqual(len(caught), 2)
            self.assertIn("index out of bounds", str(caught[0]))
            # the traceback still ends in the fake library, not in attn_doctor
            tb = caught[0].__traceback__
            while tb.tb_next:
                tb = tb.tb_next
            self.assertTrue(tb.tb_frame.f_code.co_filename.endswith("modeling_flash_attention_utils.py"))
            self.assertEqual([os.path.basename(f) for f in cap.files], ["call-000003.json"])
            self.assertEqual(cap.failures, cap.files)
            doc = read_json(cap.files[0])
            self.assertEqual(doc["batch"], {
                "attention_mask": {"lengths": [9, 8], "width": 9, "padding_side": "left"},
                "query_length": 1, "kv_length": 8})
            self.assertIn("The call raised RuntimeError: CUDA error: device-side assert triggered",
                          doc["description"])
            [entry] = manifest(out)
            self.assertEqual((entry["call"], entry["failed"], entry["layer_idx"]), (3, True, 0))

    def test_a_failing_kernel_inside_transformers_is_one_call(self):
        with fake_libraries(), temp_dir() as out:
            import transformers.modeling_flash_attention_utils as mfa
            from faketensor import FakeTensor
            model = ModelCalls()
            import transformers.modeling_utils  # noqa: F401
            with attn_doctor.capture(out, announce=False) as cap:
                # an explicit cu_seqlens overrunning the 6 packed rows
                bad = FakeTensor([0, 4, 9], dtype="int32", device="cuda:0")
                with self.assertRaises(RuntimeError):
                    model.forward(None, lq=6, lk=6, b=1, cu_seq_lens_q=bad, cu_seq_lens_k=bad,
                                  max_length_q=5, max_length_k=5)
            self.assertEqual(cap.calls, 1)
            [entry] = manifest(out)
            self.assertEqual(entry["entry"], "transformers._flash_attention_forward")
            self.assertEqual(entry["observed"][0]["cu_seqlens_q"], [0, 4, 9])
            self.assertIn("illegal memory access", entry["observed"][0]["raised"])
            self.assertIsNotNone(mfa._flash_varlen_fn)


class KernelEntryTest(unittest.TestCase):
    def test_direct_varlen_call_writes_the_varlen_block(self):
        with fake_libraries(), temp_dir() as out:
            from faketensor import FakeTensor
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                from flash_attn import flash_attn_varlen_func  # imported after install
                q = FakeTensor(shape=(9, 16, 128), dtype="float16", device="cuda:0")
                k = FakeTensor(shape=(9, 4, 128), dtype="float16", device="cuda:0")
                cu = FakeTensor([0, 4, 9], dtype="int64", device="cpu")
                out_t = flash_attn_varlen_func(q, k, k, cu, cu, FakeTensor(5, shape=()), 5,
                                               causal=True, window_size=(255, 0))
            self.assertIsNotNone(out_t)
            doc = read_json(cap.files[0])
            self.assertEqual(doc["name"], "flash-attn-varlen-call1")
            self.assertEqual(doc["model"], {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128,
                                            "dtype": "fp16", "causal": True, "sliding_window": 256})
            self.assertEqual(doc["varlen"], {"cu_seqlens_q": [0, 4, 9], "cu_seqlens_k": [0, 4, 9],
                                             "max_seqlen_q": {"tensor": 5}, "max_seqlen_k": 5,
                                             "total_q": 9, "total_k": 9})
            self.assertEqual(doc["tensors"], {"cu_seqlens_q": {"dtype": "int64", "device": "cpu"},
                                              "cu_seqlens_k": {"dtype": "int64", "device": "cpu"}})
            self.assertNotIn("batch", doc)

    def test_pass_and_the_versions_of_the_libraries_the_run_loaded(self):
        with fake_libraries(), temp_dir() as out:
            import flash_attn
            from faketensor import FakeTensor
            q = FakeTensor(shape=(9, 4, 64), dtype="bfloat16", device="cuda:0")
            cu = FakeTensor([0, 4, 9], dtype="int32", device="cuda:0")
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 5, 5)       # inference
                q.requires_grad = True
                flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 5, 5)       # a training step
                cute = types.ModuleType("flash_attn.cute")
                cute.__version__ = "4.0.0b9"
                sys.modules["flash_attn.cute"] = cute                           # FA4 loaded
                flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 5, 5)
            first, second, third = (read_json(f) for f in cap.files)
            self.assertEqual((first["pass"], second["pass"]), ("forward", "training"))
            self.assertNotIn("flash_attn_4", first["environment"])   # installed or not: unused
            self.assertNotIn("fla", first["environment"])
            self.assertEqual(third["environment"]["flash_attn_4"], "4.0.0b9")
            self.assertEqual(third["environment"]["flash_attn"], "2.6.3")
        # grad mode off: no backward will follow
        fake_torch = types.ModuleType("torch")
        fake_torch.is_grad_enabled = lambda: False
        with fake_libraries(), temp_dir() as out, mock_module("torch", fake_torch):
            import flash_attn
            from faketensor import FakeTensor
            q = FakeTensor(shape=(9, 4, 64), dtype="bfloat16", device="cuda:0")
            q.requires_grad = True
            cu = FakeTensor([0, 4, 9], dtype="int32", device="cuda:0")
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 5, 5)
            self.assertEqual(read_json(cap.files[0])["pass"], "forward")

    def test_direct_dense_call_and_strided_q(self):
        with fake_libraries(), temp_dir() as out:
            import flash_attn
            from faketensor import FakeTensor
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                q = FakeTensor(shape=(2, 5, 4, 64), dtype="bfloat16", device="cuda:0",
                               strides=(1280, 256, 64, 2))
                k = FakeTensor(shape=(2, 7, 4, 64), dtype="float16", device="cuda:0")
                flash_attn.flash_attn_func(q, k, k)
            doc = read_json(cap.files[0])
            self.assertEqual(doc["batch"], {"batch_size": 2, "query_length": 5, "kv_length": 7})
            self.assertEqual(doc["model"]["causal"], False)
            self.assertEqual(doc["tensors"], {"q": {"contiguous": False}, "k": {"dtype": "fp16"},
                                              "v": {"dtype": "fp16"}})

    def test_fla_rotary_with_model_width(self):
        with fake_libraries(), temp_dir() as out:
            from faketensor import FakeTensor
            from fla.modules import RotaryEmbedding
            rotary = RotaryEmbedding(dim=1024)
            q = FakeTensor(shape=(1, 20, 16, 64), dtype="bfloat16", device="cuda:0")
            cu = FakeTensor([0, 12, 20], dtype="int32", device="cuda:0")
            with attn_doctor.capture(out, announce=False) as cap:
                with self.assertRaises(RuntimeError):
                    rotary(q, q, seqlen_offset=0, cu_seqlens=cu, max_seqlen=2048)
            doc = read_json(cap.files[0])
            self.assertEqual(doc["environment"]["fla"], "0.6.0")
            self.assertEqual(doc["rotary"], {"implementation": "fla", "dim": 1024, "base": 10000.0,
                                             "interleaved": False, "varlen": True, "layout": "BTHD",
                                             "table_length": 2048})
            self.assertEqual(doc["varlen"], {"cu_seqlens_q": [0, 12, 20], "total_q": 20})
            self.assertEqual(doc["model"], {"num_heads": 16, "head_dim": 64, "num_kv_heads": 16,
                                            "dtype": "bf16"})

    def test_fla_rotary_without_cu_seqlens_records_t(self):
        # a packed row handed to FLA's rotary without cu_seqlens, its table built for the
        # longest sequence: FLA asserts TR >= T; the file says T, so the check predicts it
        with fake_libraries(), temp_dir() as out:
            from faketensor import FakeTensor
            from fla.modules import RotaryEmbedding
            rotary = RotaryEmbedding(dim=128)
            q = FakeTensor(shape=(1, 706, 8, 128), dtype="bfloat16", device="cuda:0")
            with attn_doctor.capture(out, announce=False) as cap:
                with self.assertRaises(AssertionError):
                    rotary(q, q, max_seqlen=256)
            doc = read_json(cap.files[0])
            self.assertEqual(doc["batch"], {"batch_size": 1, "query_length": 706, "kv_length": 706})
            self.assertEqual(doc["rotary"]["table_length"], 256)
            self.assertFalse(doc["rotary"]["varlen"])
            self.assertNotIn("varlen", doc)
            if CAN_CHECK:
                report = attn_doctor.check(cap.files[0], backend="none")
                self.assertEqual(report["first_violation"]["id"], "rotary.table")
                self.assertEqual(report["prediction"]["outcome"], "raises")
                self.assertEqual(report["prediction"]["message"], "AssertionError: TR must be >= T, got 256 and 706")

    def test_model_level_flash_attention_forward_of_old_releases(self):
        with fake_libraries(), temp_dir() as out:
            from faketensor import FakeTensor
            from transformers.modeling_utils import FakeConfig
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                from transformers.models.llama.modeling_llama import LlamaFlashAttention2
                attn = LlamaFlashAttention2(FakeConfig(model_type="llama", hidden_size=64), layer_idx=3)
                q = FakeTensor(shape=(2, 4, 4, 16), dtype="float16", device="cuda:0")
                attn.forward(q, q, q, FakeTensor([[1, 1, 1, 0], [1, 1, 1, 1]]))
            [path] = cap.files
            doc = read_json(path)
            self.assertEqual(doc["name"], "llama-layer3-call1")
            self.assertEqual(doc["batch"]["attention_mask"],
                             {"lengths": [3, 4], "width": 4, "padding_side": "right"})
            self.assertEqual(doc["model"]["hidden_size"], 64)
            self.assertEqual(manifest(out)[0]["entry"],
                             "transformers.FlashAttention2._flash_attention_forward")


class InstallTest(unittest.TestCase):
    def test_uninstall_restores_every_reference(self):
        with fake_libraries(), temp_dir() as out:
            import flash_attn
            import flash_attn.flash_attn_interface as fai
            import transformers.integrations.flash_attention as integ
            import transformers.modeling_flash_attention_utils as mfa
            import transformers.modeling_utils as mu
            originals = (mfa._flash_attention_forward, integ._flash_attention_forward,
                         integ.flash_attention_forward, fai.flash_attn_varlen_func,
                         flash_attn.flash_attn_varlen_func,
                         mu.AttentionInterface._global_mapping["flash_attention_2"])
            cap = attn_doctor.install(out, announce=False)
            self.assertIs(attn_doctor.active_capture(), cap)
            self.assertIsNot(integ._flash_attention_forward, originals[1])
            self.assertIsNot(mu.AttentionInterface._global_mapping["flash_attention_2"], originals[5])
            self.assertIs(flash_attn.flash_attn_varlen_func, fai.flash_attn_varlen_func)
            attn_doctor.uninstall()
            now = (mfa._flash_attention_forward, integ._flash_attention_forward,
                   integ.flash_attention_forward, fai.flash_attn_varlen_func,
                   flash_attn.flash_attn_varlen_func,
                   mu.AttentionInterface._global_mapping["flash_attention_2"])
            for a, b in zip(originals, now):
                self.assertIs(a, b)
            self.assertIsNone(attn_doctor.active_capture())
            self.assertFalse(any(type(f).__name__ == "ImportHook" for f in sys.meta_path))

    def test_a_cached_wrapper_serves_the_next_capture(self):
        with fake_libraries(), temp_dir() as out:
            import transformers.modeling_utils  # noqa: F401
            from faketensor import FakeTensor
            model = ModelCalls()
            mask = FakeTensor([[1, 1, 1, 1]])
            with attn_doctor.capture(os.path.join(out, "a"), every=True, announce=False):
                model.forward(mask, lq=4, lk=4, b=1)   # transformers caches the kernel wrapper
            with attn_doctor.capture(os.path.join(out, "b"), every=True, announce=False):
                model.forward(mask, lq=4, lk=4, b=1)
            self.assertEqual(manifest(os.path.join(out, "b"))[0]["observed"][0]["cu_seqlens_q"], [0, 4])

    def test_compiled_code_is_passed_through(self):
        fake_torch = types.ModuleType("torch")
        fake_torch.compiler = types.SimpleNamespace(is_compiling=lambda: True)
        with fake_libraries(), temp_dir() as out:
            import transformers.modeling_utils  # noqa: F401
            from faketensor import FakeTensor
            saved = sys.modules.get("torch")
            sys.modules["torch"] = fake_torch
            try:
                with attn_doctor.capture(out, every=True, announce=False) as cap:
                    ModelCalls().forward(FakeTensor([[1, 1]]), lq=2, lk=2, b=1)
            finally:
                if saved is None:
                    del sys.modules["torch"]
                else:
                    sys.modules["torch"] = saved
            self.assertEqual((cap.calls, cap.files), (0, []))

    def test_call_mode_and_limit(self):
        with fake_libraries(), temp_dir() as out:
            import transformers.modeling_utils  # noqa: F401
            from faketensor import FakeTensor
            mask = FakeTensor([[1, 1]])
            with attn_doctor.capture(os.path.join(out, "n"), call=3, announce=False) as cap:
                for _ in range(3):
                    ModelCalls().forward(mask, lq=2, lk=2, b=1)
            self.assertEqual([os.path.basename(f) for f in cap.files], ["call-000003.json"])
            self.assertEqual(cap.calls, 6)
            with attn_doctor.capture(os.path.join(out, "l"), every=True, limit=2, announce=False) as cap:
                for _ in range(3):
                    ModelCalls().forward(mask, lq=2, lk=2, b=1)
            self.assertEqual(len(cap.files), 2)

    def test_a_recording_error_leaves_the_call_and_later_calls_alone(self):
        import contextlib
        import io

        class BrokenConfig:
            model_type = "llama"

            @property
            def hidden_size(self):
                raise RuntimeError("config property blew up")

        with fake_libraries(), temp_dir() as out:
            import transformers.modeling_utils as mu
            from faketensor import FakeTensor
            mask = FakeTensor([[1, 1]])
            q, k, v = ModelCalls.qkv(1, 2, 2)
            err = io.StringIO()
            with contextlib.redirect_stderr(err), \
                    attn_doctor.capture(out, every=True, announce=False) as cap:
                result = mu.FakeAttention(BrokenConfig(), 0)(q, k, v, mask)
                ModelCalls().forward(mask, lq=2, lk=2, b=1)
            import flash_attn.flash_attn_interface as fai
            self.assertIsNotNone(result[0])
            self.assertEqual(len(fai.CALLS), 3)
            self.assertIn("config property blew up", err.getvalue())
            self.assertEqual([os.path.basename(f) for f in cap.files],
                             ["call-000002.json", "call-000003.json"])

    def test_module_is_callable_after_import(self):
        import attn_doctor.capture as module  # noqa: F401
        self.assertIsInstance(attn_doctor.capture("x", every=True), attn_doctor.Capture)
        with self.assertRaises(ValueError):
            attn_doctor.Capture(mode="sometimes")


if __name__ == "__main__":
    unittest.main()


class TorchVarlenAttnTest(unittest.TestCase):
    """torch.nn.attention.varlen.varlen_attn (torch >= 2.10) is an entry point of its own."""

    def call(self, release, *positional, capability=(9, 0), cu_last=9, **kwargs):
        with fake_libraries(), temp_dir() as out:
            import fake_torch_varlen
            from faketensor import FakeTensor
            torch, varlen = fake_torch_varlen.modules(release, capability)
            with mock_module("torch", torch), mock_module("torch.nn.attention.varlen", varlen):
                with attn_doctor.capture(out, every=True, announce=False) as cap:
                    q = FakeTensor(shape=(9, 8, 64), dtype="bfloat16", device="cuda:0")
                    k = FakeTensor(shape=(9, 2, 64), dtype="bfloat16", device="cuda:0")
                    cu = FakeTensor([0, 4, cu_last], dtype="int32", device="cuda:0")
                    self.assertIsNotNone(attn_doctor.hooks.original_of(varlen.varlen_attn))  # wrapped
                    try:
                        varlen.varlen_attn(q, k, k, cu, cu, 5, 5, *positional, **kwargs)
                    except RuntimeError:
                        pass
                self.assertIsNone(attn_doctor.hooks.original_of(varlen.varlen_attn))     # and restored
            self.assertEqual(len(fake_torch_varlen.CALLS), 1)
            fake_torch_varlen.CALLS.clear()
            self.assertEqual(len(cap.files), 1)
            return read_json(cap.files[0])

    def test_2_11_call_is_recorded_with_its_api_window_and_gpu(self):
        doc = self.call("2.11.0", window_size=(127, 0))
        self.assertEqual(doc["varlen"], {"cu_seqlens_q": [0, 4, 9], "cu_seqlens_k": [0, 4, 9],
                                         "max_seqlen_q": 5, "max_seqlen_k": 5, "total_q": 9, "total_k": 9,
                                         "api": "torch.varlen_attn", "window_size": [127, 0]})
        self.assertEqual(doc["model"], {"num_heads": 8, "num_kv_heads": 2, "head_dim": 64, "dtype": "bf16",
                                        "causal": False})
        self.assertEqual(doc["environment"]["torch"], "2.11.0+cu130")
        self.assertEqual(doc["environment"]["gpu_arch"], "sm_90")
        self.assertTrue(doc["name"].startswith("torch-varlen-call"))

    def test_causal_as_each_release_computes_it(self):
        # 2.11: is_causal = window_size == (-1, 0), a tuple comparison
        self.assertTrue(self.call("2.11.0", window_size=(-1, 0))["model"]["causal"])
        listed = self.call("2.11.0", window_size=[-1, 0])
        self.assertFalse(listed["model"]["causal"])
        self.assertEqual(listed["varlen"]["window_size"], [-1, 0])
        # 2.10: is_causal, also as the eighth positional argument
        doc = self.call("2.10.0", True, capability=(8, 0))
        self.assertTrue(doc["model"]["causal"])
        self.assertNotIn("window_size", doc["varlen"])
        self.assertEqual(doc["environment"]["gpu_arch"], "sm_80")

    def test_a_failing_call_is_written_with_what_it_raised(self):
        doc = self.call("2.11.0", cu_last=12)
        self.assertEqual(doc["varlen"]["cu_seqlens_q"], [0, 4, 12])
        self.assertEqual(doc["varlen"]["total_q"], 9)
        self.assertIn("illegal memory access", doc["description"])
