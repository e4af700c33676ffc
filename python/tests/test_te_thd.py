"""Transformer Engine's DotProductAttention with qkv_format "thd" (docs/spec/
transformer-engine-thd.md): the capture records a THD call with its padded offsets and its
rank of the context-parallel group, other formats go through unrecorded, every rank's n-th
call shares one call id; the guard stops a call whose sequences are not padded to 2 x CP.
Against a stand-in with TE's signature (tests/fakepkgs/transformer_engine), which checks
nothing itself."""
import json
import unittest

import attn_doctor
from attn_doctor import diagnosis, te_thd

from .support import fake_libraries, temp_dir

NEEDS_NATIVE = unittest.skipIf(diagnosis._native is None, "attn_doctor._native is not built for this Python")


def read_json(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def thd_inputs(rows, cu, padded):
    from faketensor import FakeTensor
    q = FakeTensor(shape=(rows, 8, 64), dtype="bfloat16", device="cuda:1")
    k = FakeTensor(shape=(rows, 2, 64), dtype="bfloat16", device="cuda:1")
    return (q, k, k, FakeTensor(cu, dtype="int32", device="cuda:1"),
            FakeTensor(padded, dtype="int32", device="cuda:1"))


class CaptureTest(unittest.TestCase):
    def test_a_context_parallel_thd_call_is_recorded_with_its_rank(self):
        with fake_libraries(), temp_dir() as out:
            import transformer_engine.pytorch as te
            dpa = te.DotProductAttention(8, 64, num_gqa_groups=2, qkv_format="thd",
                                         attn_mask_type="padding_causal", cp_group=te.FakeGroup(2, 1))
            q, k, v, cu, padded = thd_inputs(10, [0, 7, 13, 17], [0, 8, 16, 20])
            before = te_thd.current_call()
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                self.assertIsNotNone(attn_doctor.hooks.original_of(te.DotProductAttention.forward))
                dpa(q, k, v, cu_seqlens_q=cu, cu_seqlens_kv=cu, cu_seqlens_q_padded=padded,
                    cu_seqlens_kv_padded=padded, max_seqlen_q=8, max_seqlen_kv=8)
            self.assertIsNone(attn_doctor.hooks.original_of(te.DotProductAttention.forward))
            self.assertEqual(len(te.CALLS), 1)
            self.assertEqual(len(cap.files), 1)
            doc = read_json(cap.files[0])
        self.assertEqual(doc["varlen"], {
            "api": "transformer_engine.dot_product_attention", "cu_seqlens_q": [0, 7, 13, 17],
            "cu_seqlens_q_padded": [0, 8, 16, 20], "cu_seqlens_kv_padded": [0, 8, 16, 20],
            "max_seqlen_q": 8, "max_seqlen_k": 8, "total_q": 10, "total_k": 10, "attn_mask_type": "padding_causal"})
        self.assertEqual(doc["context_parallel"], {"size": 2, "rank": 1, "comm_type": "p2p",
                                                    "call": f"te-dpa-{before + 1}"})
        self.assertEqual(doc["model"], {"num_heads": 8, "num_kv_heads": 2, "head_dim": 64, "dtype": "bf16",
                                        "causal": True})
        self.assertEqual(doc["environment"]["device"], "cuda:1")

    def test_other_formats_go_through_unrecorded_and_call_ids_count_calls(self):
        with fake_libraries(), temp_dir() as out:
            import transformer_engine.pytorch as te
            dpa = te.DotProductAttention(8, 64, qkv_format="bshd", attn_mask_type="padding_causal")
            q, k, v, cu, padded = thd_inputs(8, [0, 4, 8], [0, 4, 8])
            dpa.cp_group = te.FakeGroup(2, 0)
            before = te_thd.current_call()
            with attn_doctor.capture(out, every=True, announce=False) as cap:
                dpa(q, k, v)                                             # bshd: not recorded
                dpa(q, k, v, qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu)
                dpa(q, k, v, qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu)
            self.assertEqual(len(te.CALLS), 3)
            docs = [read_json(f) for f in cap.files]
        self.assertEqual(len(docs), 2)
        # every DotProductAttention call of the thread is counted, so each rank's n-th call
        # gets the same id
        self.assertEqual([d["context_parallel"]["call"] for d in docs],
                         [f"te-dpa-{before + 2}", f"te-dpa-{before + 3}"])
        self.assertEqual(docs[0]["varlen"]["cu_seqlens_q"], [0, 4, 8])
        self.assertNotIn("cu_seqlens_q_padded", docs[0]["varlen"])

    def test_process_group_facts(self):
        with fake_libraries():
            import transformer_engine.pytorch as te
            self.assertEqual(te_thd.process_group_facts(None), {"cp_size": 1, "cp_rank": 0})
            self.assertEqual(te_thd.process_group_facts(te.FakeGroup(4, 3)), {"cp_size": 4, "cp_rank": 3})


@NEEDS_NATIVE
class GuardTest(unittest.TestCase):
    def test_sequences_not_padded_to_2cp_are_stopped(self):
        with fake_libraries():
            import transformer_engine.pytorch as te
            dpa = te.DotProductAttention(8, 64, num_gqa_groups=2, qkv_format="thd",
                                         attn_mask_type="padding_causal", cp_group=te.FakeGroup(2, 0))
            # 7 and 6 tokens padded to 8 and 6: 6 is not a multiple of 2 x CP = 4
            q, k, v, cu, padded = thd_inputs(7, [0, 7, 13], [0, 8, 14])
            with attn_doctor.guard():
                with self.assertRaises(attn_doctor.VarlenError) as caught:
                    dpa(q, k, v, cu_seqlens_q=cu, cu_seqlens_kv=cu, cu_seqlens_q_padded=padded,
                        cu_seqlens_kv_padded=padded, max_seqlen_q=8, max_seqlen_kv=8)
            self.assertEqual(te.CALLS, [])  # stopped before the forward ran
            self.assertIn("te.cp_padding_multiple", str(caught.exception))

    def test_a_healthy_call_goes_through(self):
        with fake_libraries():
            import transformer_engine.pytorch as te
            dpa = te.DotProductAttention(8, 64, num_gqa_groups=2, qkv_format="thd",
                                         attn_mask_type="padding_causal", cp_group=te.FakeGroup(2, 0))
            q, k, v, cu, padded = thd_inputs(10, [0, 7, 13, 17], [0, 8, 16, 20])
            with attn_doctor.guard():
                dpa(q, k, v, cu_seqlens_q=cu, cu_seqlens_kv=cu, cu_seqlens_q_padded=padded,
                    cu_seqlens_kv_padded=padded, max_seqlen_q=8, max_seqlen_kv=8)
            self.assertEqual(len(te.CALLS), 1)


if __name__ == "__main__":
    unittest.main()
