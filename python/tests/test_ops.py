"""attn_doctor.ops and attn_implementation="attn_doctor" on CPU tensors (the CPU twin of the
checked kernels): a tiny Llama's training step on a packed batch matches eager attention run
per sequence, a broken packed batch raises VarlenError, and torch.compile(fullgraph=True)
captures a model on the custom ops.

Needs torch and transformers (>= 5) in the Python running the tests; ctest runs this file with
the interpreter of ATTN_DOCTOR_TORCH_PYTHON (scripts/torch-env makes one). Without them each
test is skipped and says why."""
import unittest

from attn_doctor import diagnosis

try:
    import torch
except ImportError:
    torch = None
try:
    import transformers
except ImportError:
    transformers = None

WHY = ("torch is not installed in this Python" if torch is None else
       "transformers is not installed in this Python" if transformers is None else
       "attn_doctor._native is not built for this Python" if diagnosis._native is None else None)
NEEDS = unittest.skipIf(WHY is not None, WHY or "")


def _reference(q, k, v, cu, causal):
    """fp32 attention per segment (SDPA on each), GQA by repetition."""
    outs = []
    g = q.shape[1] // k.shape[1]
    for b in range(len(cu) - 1):
        a, e = int(cu[b]), int(cu[b + 1])
        qs = q[a:e].float().transpose(0, 1)
        ks = k[a:e].float().transpose(0, 1).repeat_interleave(g, 0)
        vs = v[a:e].float().transpose(0, 1).repeat_interleave(g, 0)
        outs.append(torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=causal).transpose(0, 1))
    return torch.cat(outs)


@NEEDS
class OpsTest(unittest.TestCase):
    def setUp(self):
        from attn_doctor import ops
        self.ops = ops
        ops.set_policy("step")
        ops._pending.clear()

    def test_forward_and_backward_match_attention_per_segment(self):
        torch.manual_seed(0)
        cu = torch.tensor([0, 5, 12, 20], dtype=torch.int32)
        for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 3e-2)):
            q = torch.randn(20, 4, 64, dtype=dtype, requires_grad=True)
            k = torch.randn(20, 2, 64, dtype=dtype, requires_grad=True)
            v = torch.randn(20, 2, 64, dtype=dtype, requires_grad=True)
            out = self.ops.flash_attn_varlen_func(q, k, v, cu, cu, 8, 8, causal=True)
            ref_in = [t.detach().float().requires_grad_() for t in (q, k, v)]
            ref = _reference(*ref_in, cu, True)
            self.assertLess((out.float() - ref).abs().max().item(), tol, dtype)
            g = torch.randn(out.shape, dtype=dtype)
            out.backward(g)
            ref.backward(g.float())
            for got, want in zip((q.grad, k.grad, v.grad), ref_in):
                self.assertLess((got.float() - want.grad).abs().max().item(), 4 * tol, dtype)

    def test_torch_varlen_attn_signature(self):
        torch.manual_seed(1)
        cu = torch.tensor([0, 7, 16], dtype=torch.int32)
        q, k, v = (torch.randn(16, 2, 64) for _ in range(3))
        out = self.ops.varlen_attn(q, k, v, cu, cu, 9, 9, window_size=(-1, 0))
        self.assertLess((out - _reference(q, k, v, cu, True)).abs().max().item(), 1e-5)
        out = self.ops.varlen_attn(q, k, v, cu, cu, 9, 9)  # (-1, -1): not causal
        self.assertLess((out - _reference(q, k, v, cu, False)).abs().max().item(), 1e-5)

    def test_a_call_past_the_tensor_raises_before_running(self):
        from attn_doctor import VarlenError
        q = torch.randn(20, 2, 64)
        bad = torch.tensor([0, 5, 12, 26], dtype=torch.int32)
        with self.assertRaises(VarlenError) as caught:
            self.ops.flash_attn_varlen_func(q, q, q, bad, bad, 14, 14, causal=True)
        err = caught.exception
        self.assertEqual(err.id, "cu_seqlens.total")
        self.assertTrue(err.fix)
        self.assertEqual(err.batch["varlen"]["cu_seqlens_q"], [0, 5, 12, 26])

    def test_rows_no_launch_writes_are_nan_and_raised_at_the_next_call(self):
        # max_seqlen_q smaller than a segment: FA2's grid leaves that segment's last rows
        # unwritten. The host check names it; the kernel's coverage is what the error adds.
        from attn_doctor import VarlenError
        import attn_doctor.ops as ops
        q = torch.randn(200, 1, 64)
        cu = torch.tensor([0, 200], dtype=torch.int32)
        result = ops._native.varlen_fwd_cpu(2, ops._tensor_arg(q), ops._tensor_arg(q), ops._tensor_arg(q),
                                            ops._cu_arg(cu), ops._cu_arg(cu), 100, 200, 0.125, 0.0, True, -1, -1,
                                            *self._buffers(q))
        self.assertEqual(result["rows"]["unwritten"], 72)   # rows 128..199: the grid covers one 128-row block
        self.assertEqual(result["rows"]["first_unwritten"], 128)
        self.assertIsNone(result["access"])
        with self.assertRaises(VarlenError):
            self.ops.flash_attn_varlen_func(q, q, q, cu, cu, 100, 200, causal=True)

    def _buffers(self, q):
        self._out = torch.empty_like(q)
        self._lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32)
        return self._out.data_ptr(), self._lse.data_ptr()

    def test_refused_accesses_are_counted_not_performed(self):
        # cu_seqlens_k past k: the twin refuses the reads past the tensor and says which
        import attn_doctor.ops as ops
        q = torch.randn(16, 1, 64)
        k = torch.randn(10, 1, 64)
        cu_q = torch.tensor([0, 16], dtype=torch.int32)
        cu_k = torch.tensor([0, 16], dtype=torch.int32)
        result = ops._native.varlen_fwd_cpu(2, ops._tensor_arg(q), ops._tensor_arg(k), ops._tensor_arg(k),
                                            ops._cu_arg(cu_q), ops._cu_arg(cu_k), 16, 16, 0.125, 0.0, False, -1, -1,
                                            *self._buffers(q))
        access = result["access"]
        self.assertEqual(access["buffer"], "k")
        self.assertEqual(access["kind"], "read")
        self.assertEqual(access["index"], 10)
        self.assertEqual(access["bound"], 10)
        self.assertGreater(access["count"], 0)


def _tiny_llama(implementation):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         attn_implementation=implementation)
    return LlamaForCausalLM(config).float()


LENGTHS = (10, 8, 6)


def _packed():
    torch.manual_seed(3)
    ids = torch.randint(0, 96, (1, sum(LENGTHS)))
    pos = torch.cat([torch.arange(n) for n in LENGTHS])[None]
    return ids, pos


def _loss(logits, ids):
    return torch.nn.functional.cross_entropy(logits[0, :-1].float(), ids[0, 1:])


@NEEDS
class TransformersTest(unittest.TestCase):
    def setUp(self):
        import attn_doctor.hf  # noqa: F401  (registers the implementation)
        from attn_doctor import ops
        ops.set_policy("step")
        ops._pending.clear()

    def test_packed_training_step_matches_eager_per_sequence(self):
        ids, pos = _packed()
        model = _tiny_llama("attn_doctor")
        loss = _loss(model(input_ids=ids, position_ids=pos).logits, ids)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}

        ref = _tiny_llama("eager")
        ref.load_state_dict(model.state_dict())
        logits, start = [], 0
        for n in LENGTHS:  # each sequence on its own: nothing to pack, nothing to mask
            logits.append(ref(input_ids=ids[:, start:start + n]).logits)
            start += n
        ref_loss = _loss(torch.cat(logits, 1), ids)
        ref_loss.backward()
        self.assertLess(abs(loss.item() - ref_loss.item()), 1e-5)
        for name, p in ref.named_parameters():
            scale = p.grad.abs().max().item() + 1e-12
            self.assertLess((grads[name] - p.grad).abs().max().item() / scale, 1e-4, name)

    def test_flash_kwargs_path_matches_position_ids_path(self):
        ids, pos = _packed()
        model = _tiny_llama("attn_doctor")
        cu = torch.tensor([0, 10, 18, 24], dtype=torch.int32)
        a = model(input_ids=ids, position_ids=pos).logits
        b = model(input_ids=ids, position_ids=pos, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=10,
                  max_length_k=10).logits
        self.assertLess((a - b).abs().max().item(), 1e-6)

    def test_padded_batch_matches_eager(self):
        torch.manual_seed(4)
        ids = torch.randint(0, 96, (2, 9))
        mask = torch.ones(2, 9, dtype=torch.long)
        mask[1, 6:] = 0
        model = _tiny_llama("attn_doctor")
        ref = _tiny_llama("eager")
        ref.load_state_dict(model.state_dict())
        a = model(input_ids=ids, attention_mask=mask).logits
        b = ref(input_ids=ids, attention_mask=mask).logits
        self.assertLess((a[0] - b[0]).abs().max().item(), 1e-4)
        self.assertLess((a[1, :6] - b[1, :6]).abs().max().item(), 1e-4)

    def test_broken_packed_batch_raises(self):
        from attn_doctor import VarlenError
        ids, pos = _packed()
        model = _tiny_llama("attn_doctor")
        # a collator's cu_seqlens for a longer batch than the one it packed
        cu = torch.tensor([0, 10, 18, 30], dtype=torch.int32)
        with self.assertRaises(VarlenError) as caught:
            loss = _loss(model(input_ids=ids, position_ids=pos, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=12,
                               max_length_k=12).logits, ids)
            loss.backward()
        self.assertEqual(caught.exception.id, "cu_seqlens.total")
        self.assertIn("prediction", str(caught.exception))

    def test_compile_fullgraph(self):
        ids, pos = _packed()
        model = _tiny_llama("attn_doctor")
        cu = torch.tensor([0, 10, 18, 24], dtype=torch.int32)
        eager = model(input_ids=ids, position_ids=pos, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=10,
                      max_length_k=10).logits
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        logits = compiled(input_ids=ids, position_ids=pos, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=10,
                          max_length_k=10).logits
        self.assertLess((logits - eager).abs().max().item(), 1e-5)
        _loss(logits, ids).backward()  # the backward through the registered autograd
        self.assertIsNotNone(model.model.layers[0].self_attn.q_proj.weight.grad)


if __name__ == "__main__":
    unittest.main()


STANDIN = '''
def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    raise RuntimeError("the stand-in flash_attn kernel ran")
'''

SCRIPT = '''
import sys, torch
import flash_attn
torch.manual_seed(0)
q = torch.randn(20, 2, 64)
cu = torch.tensor([0, 5, 12, 20], dtype=torch.int32)
out = flash_attn.flash_attn_varlen_func(q, q, q, cu, cu, 8, 8, causal=True)
print("shape", tuple(out.shape), "finite", bool(torch.isfinite(out).all()))
bad = torch.tensor([0, 5, 12, 26], dtype=torch.int32)
flash_attn.flash_attn_varlen_func(q, q, q, bad, bad, 14, 14, causal=True)
'''


@NEEDS
class GuardKernelsTest(unittest.TestCase):
    def test_guard_kernels_swaps_flash_attn_under_an_unchanged_script(self):
        import os
        import subprocess
        import sys
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "flash_attn"))
            with open(os.path.join(tmp, "flash_attn", "__init__.py"), "w") as fh:
                fh.write(STANDIN)
            script = os.path.join(tmp, "train.py")
            with open(script, "w") as fh:
                fh.write(SCRIPT)
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([tmp] + [p for p in sys.path if p])
            proc = subprocess.run([sys.executable, "-m", "attn_doctor.guard", "--kernels", "--", sys.executable, script],
                                  env=env, capture_output=True, text=True, timeout=600)
        self.assertIn("shape (20, 2, 64) finite True", proc.stdout, proc.stderr)
        self.assertNotIn("stand-in flash_attn kernel ran", proc.stderr)
        self.assertIn("VarlenError", proc.stderr)
        self.assertIn("cu_seqlens.total", proc.stderr)
        self.assertEqual(proc.returncode, 1, proc.stderr)
