"""attn_doctor.ops and attn_implementation="attn_doctor" on CPU tensors (the CPU twin of the
checked kernels): a tiny Llama's training step on a packed batch matches eager attention run
per sequence, a broken packed batch raises VarlenError, and torch.compile(fullgraph=True)
captures a model on the custom ops.

Needs torch and transformers (>= 5) in the Python running the tests; ctest runs this file with
the interpreter of ATTN_DOCTOR_TORCH_PYTHON (scripts/torch-env makes one). Without them each
test is skipped and says why."""
import unittest

from .support import torch_skip_reason

WHY = torch_skip_reason()
if WHY is None:
    import torch
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
        ops._reset()

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

    def _with_seqused(self, q, k, v, cu_q, cu_k, max_q, max_k, used):
        # the op as FA2's mha_varlen_fwd takes seqused_k (torch's varlen_attn from 2.12 passes it)
        out, _ = torch.ops.attn_doctor.varlen_fwd(q, k, v, cu_q, cu_k, max_q, max_k, 0.125, False, -1, -1, 0.0,
                                                  "flash_attn.varlen", self.ops._training(q, k, v), used)
        return out

    def test_seqused_k_forward_attends_to_the_first_keys(self):
        # segment b uses its first seqused_k[b] keys
        from attn_doctor import VarlenError
        torch.manual_seed(2)
        cu = torch.tensor([0, 7, 16], dtype=torch.int32)
        q, k, v = (torch.randn(16, 2, 64) for _ in range(3))
        used = torch.tensor([5, 3], dtype=torch.int32)
        if tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (2, 12):
            # the installed torch's varlen_attn has no seqused_k: the host check says so
            with self.assertRaises(VarlenError) as caught:
                self.ops.varlen_attn(q, k, v, cu, cu, 9, 9, seqused_k=used)
            self.assertEqual(caught.exception.id, "input.feature")
        out = self._with_seqused(q, k, v, cu, cu, 9, 9, used)
        for (a, e), (k0, k1) in (((0, 7), (0, 5)), ((7, 16), (7, 10))):
            qs, ks, vs = q[a:e].transpose(0, 1), k[k0:k1].transpose(0, 1), v[k0:k1].transpose(0, 1)
            want = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, scale=0.125).transpose(0, 1)
            self.assertLess((out[a:e] - want).abs().max().item(), 1e-5)
        self.ops.check()  # no gradient asked: nothing recorded

    def test_training_with_seqused_k_short_of_a_segment_is_recorded_by_the_backward(self):
        # FA2's backward takes no seqused_k: keys 500..511 of segment 1 enter the gradient the
        # forward did not use (the oracle's fa2-seqused-k-within-segments-fixed, measured on an H100)
        from attn_doctor import VarlenError
        torch.manual_seed(5)
        cu_q = torch.tensor([0, 1, 2], dtype=torch.int32)
        cu_k = torch.tensor([0, 512, 1024], dtype=torch.int32)
        q = torch.randn(2, 4, 64, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(1024, 1, 64, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(1024, 1, 64, dtype=torch.bfloat16, requires_grad=True)
        used = torch.tensor([512, 500], dtype=torch.int32)
        out = self._with_seqused(q, k, v, cu_q, cu_k, 1, 512, used)
        out.float().sum().backward()
        with self.assertRaises(VarlenError) as caught:
            self.ops.check()
        text = "\n".join(caught.exception.kernel)
        self.assertIn("48 key row(s) x head(s)", text)  # 12 keys x 4 heads
        self.assertIn("seqused_k", text)
        self.assertIn("k row 1012", text)

    def test_sync_policy_keeps_a_broken_call_until_check_and_reset_forgets_it(self):
        # the same broken backward under "sync": counted by pending(), raised by check() only;
        # _reset() (tests, benchmarks) drops it, and check() then has nothing to raise
        from attn_doctor import VarlenError
        cu_q = torch.tensor([0, 1, 2], dtype=torch.int32)
        cu_k = torch.tensor([0, 512, 1024], dtype=torch.int32)
        q = torch.randn(2, 4, 64, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(1024, 1, 64, dtype=torch.bfloat16, requires_grad=True)
        used = torch.tensor([512, 500], dtype=torch.int32)
        self.ops.set_policy("sync")
        try:
            for forget in (False, True):
                self._with_seqused(q, k, k, cu_q, cu_k, 1, 512, used).float().sum().backward()
                self.assertEqual(self.ops.pending(), 1)
                if forget:
                    self.ops._reset()
                    self.assertEqual(self.ops.pending(), 0)
                    self.ops.check()
                else:
                    with self.assertRaises(VarlenError):
                        self.ops.check()
                    self.assertEqual(self.ops.pending(), 0)
        finally:
            self.ops.set_policy("step")

    def test_backward_launch_check_records_keys_past_max_seqlen_k(self):
        # the twin's launch check, without the host check in front: max_seqlen_k 100 gives the
        # backward's grid one 128-key block; segments of 300 keys leave 172 each out
        import attn_doctor.ops as ops
        torch.manual_seed(6)
        q = torch.randn(2, 2, 64, dtype=torch.bfloat16)
        k = torch.randn(600, 2, 64, dtype=torch.bfloat16)
        cu_q = torch.tensor([0, 1, 2], dtype=torch.int32)
        cu_k = torch.tensor([0, 300, 600], dtype=torch.int32)
        out, lse = self._buffers(q)
        ops._native.varlen_fwd_cpu(0, ops._tensor_arg(q), ops._tensor_arg(k), ops._tensor_arg(k), ops._cu_arg(cu_q),
                                   ops._cu_arg(cu_k), 1, 100, 0.125, 0.0, False, -1, -1, out, lse)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(k)
        r = ops._native.varlen_bwd_cpu(0, ops._tensor_arg(q), ops._tensor_arg(k), ops._tensor_arg(k),
                                       ops._tensor_arg(self._out), ops._tensor_arg(torch.ones_like(q)), lse,
                                       ops._cu_arg(cu_q), ops._cu_arg(cu_k), 1, 100, 0.125, 0.0, False, -1, -1,
                                       dq.data_ptr(), dk.data_ptr(), dv.data_ptr())
        first = r["launches"][0]  # dot_do_o's record holds the launch check
        self.assertEqual(first["region"], "max_seqlen")
        self.assertEqual(first["count"], 2 * 172 * 2)  # segments x keys x heads
        self.assertEqual((first["row"], first["bound"], first["segment"]), (128, 128, 0))
        # a max_seqlen_k that covers the segments: nothing
        ops._native.varlen_fwd_cpu(0, ops._tensor_arg(q), ops._tensor_arg(k), ops._tensor_arg(k), ops._cu_arg(cu_q),
                                   ops._cu_arg(cu_k), 1, 300, 0.125, 0.0, False, -1, -1, out, lse)
        r = ops._native.varlen_bwd_cpu(0, ops._tensor_arg(q), ops._tensor_arg(k), ops._tensor_arg(k),
                                       ops._tensor_arg(self._out), ops._tensor_arg(torch.ones_like(q)), lse,
                                       ops._cu_arg(cu_q), ops._cu_arg(cu_k), 1, 300, 0.125, 0.0, False, -1, -1,
                                       dq.data_ptr(), dk.data_ptr(), dv.data_ptr())
        self.assertIsNone(r["access"])

    def _table(self, rows, dim):
        inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        f = torch.outer(torch.arange(rows, dtype=torch.float32), inv)
        return f.cos(), f.sin()

    def test_checked_rotary_matches_the_rotation_and_its_backward(self):
        torch.manual_seed(7)
        x = torch.randn(2, 16, 2, 32, requires_grad=True)
        cos, sin = self._table(16, 32)
        for rotate in (self.ops.rotary_embedding, self.ops.apply_rotary_emb):
            y = rotate(x, cos, sin)
            x1, x2 = x[..., :16], x[..., 16:]
            c, s_ = cos[None, :, None], sin[None, :, None]
            want = torch.cat([x1 * c - x2 * s_, x1 * s_ + x2 * c], -1)
            self.assertLess((y - want).abs().max().item(), 1e-5)
            g = torch.randn_like(y)
            (gx,) = torch.autograd.grad(y, x, g)
            (wx,) = torch.autograd.grad(want, x, g)
            self.assertLess((gx - wx).abs().max().item(), 1e-5)

    def test_checked_rotary_left_padding_offsets(self):
        # FLA's left-padding offsets (fla-org/flash-linear-attention#967): FLA masks the negative
        # positions and leaves those rows of its new tensor unwritten; flash_attn's kernel masks
        # the table only from above and reads before it (refused here)
        from attn_doctor import VarlenError
        x = torch.randn(2, 16, 2, 32, dtype=torch.bfloat16)
        cos, sin = self._table(16, 32)
        offsets = torch.tensor([0, -4], dtype=torch.int32)
        with self.assertRaises(VarlenError) as caught:
            self.ops.rotary_embedding(x, cos, sin, seqlen_offsets=offsets)
        self.assertEqual(caught.exception.id, "result.finite")
        self.assertIn("4 output row(s) no program wrote", caught.exception.kernel[0])
        self.assertIn("row 16", caught.exception.kernel[0])  # the second sequence's first row
        with self.assertRaises(VarlenError) as caught:
            self.ops.apply_rotary_emb(x, cos, sin, seqlen_offsets=offsets)
        self.assertEqual(caught.exception.id, "rotary.access")
        self.assertIn("8 access(es) outside the cos/sin table", caught.exception.kernel[0])  # 4 rows x 2 heads
        self.ops.rotary_embedding(x, cos, sin, seqlen_offsets=torch.tensor([0, 0], dtype=torch.int32))

    def test_checked_rotary_varlen_rows_past_max_seqlen(self):
        # flash_attn's grid comes from max_seqlen: rows of a longer segment are never rotated
        from attn_doctor import VarlenError
        x = torch.randn(24, 2, 32)
        cos, sin = self._table(24, 32)
        cu = torch.tensor([0, 20, 24], dtype=torch.int32)
        self.ops.apply_rotary_emb(x, cos, sin, cu_seqlens=cu, max_seqlen=20)
        with self.assertRaises(VarlenError) as caught:
            self.ops.apply_rotary_emb(x, cos, sin, cu_seqlens=cu, max_seqlen=8)
        self.assertIn("12 row(s) of a segment past max_seqlen's grid", "; ".join(caught.exception.kernel))

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


TINY = dict(vocab_size=96, hidden_size=128, intermediate_size=192, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, max_position_embeddings=64)


def _tiny_llama(implementation, dtype=None, device="cpu", **config):
    """A small Llama on `implementation` (the same weights for every implementation: seed 0);
    `config` overrides TINY (bench/gpu/ops_gpu.py builds its larger one here too)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(attn_implementation=implementation, **{**TINY, **config}))
    return model.to(device=device, dtype=dtype or torch.float32)


LENGTHS = (10, 8, 6)


def _packed(lengths=LENGTHS, vocab=96, device="cpu", seed=3):
    """input ids and position ids (restarting per sequence) of sequences packed into one row."""
    torch.manual_seed(seed)
    ids = torch.randint(0, vocab, (1, sum(lengths)))
    pos = torch.cat([torch.arange(n) for n in lengths])[None]
    return ids.to(device), pos.to(device)


def _loss(logits, ids):
    return torch.nn.functional.cross_entropy(logits[0, :-1].float(), ids[0, 1:])


@NEEDS
class TransformersTest(unittest.TestCase):
    def setUp(self):
        import attn_doctor.hf  # noqa: F401  (registers the implementation)
        from attn_doctor import ops
        ops.set_policy("step")
        ops._reset()

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
