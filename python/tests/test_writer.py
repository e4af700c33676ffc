"""The batch-file writer: every encoding it emits, sidecars, JSON validity, determinism."""
import json
import os
import unittest

from attn_doctor import npy
from attn_doctor.batchfile import FORMAT, Encoder, dumps, recover_2d_from_4d, write_batch_file

from .support import temp_dir


def flat(rows):
    return [x for row in rows for x in row]


class MaskEncodingTest(unittest.TestCase):
    def test_left_padding_becomes_lengths(self):
        enc = Encoder("c")
        rows = [[0, 0, 1, 1], [1, 1, 1, 1]]
        self.assertEqual(enc.mask(flat(rows), [2, 4], "int64"),
                         {"lengths": [2, 4], "width": 4, "padding_side": "left"})

    def test_right_padding_becomes_lengths(self):
        enc = Encoder("c")
        rows = [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]]
        self.assertEqual(enc.mask(flat(rows), [2, 6], "bool"),
                         {"lengths": [3, 6], "width": 6, "padding_side": "right"})

    def test_mixed_sides_and_segment_ids_stay_dense(self):
        enc = Encoder("c")
        mixed = [[0, 1, 1], [1, 1, 0]]
        self.assertEqual(enc.mask(flat(mixed), [2, 3], "int64"), {"values": mixed})
        segments = [[1, 1, 2, 2, 0]]
        self.assertEqual(enc.mask(flat(segments), [1, 5], "int64"), {"values": segments})
        self.assertEqual(enc.sidecars, [])

    def test_rank_3_mask_states_its_rank(self):
        enc = Encoder("c")
        obj = enc.mask([1, 0, 1, 1], [1, 2, 2], "int64")
        self.assertEqual(obj, {"values": [[[1, 0], [1, 1]]], "rank": 3})

    def test_large_mask_goes_to_a_sidecar(self):
        enc = Encoder("call-000007", threshold=8)
        rows = [[1, 0, 1, 0, 1], [0, 1, 0, 1, 1]]
        obj = enc.mask(flat(rows), [2, 5], "int64")
        self.assertEqual(obj, {"file": "call-000007.attention_mask.npy"})
        self.assertEqual(len(enc.sidecars), 1)
        car = enc.sidecars[0]
        self.assertEqual((car.values, car.shape, car.dtype), (flat(rows), [2, 5], "int64"))

    def test_additive_float_mask_records_where_nonzero_selects(self):
        enc = Encoder("c")
        neg = -3.0e38
        obj = enc.mask([0.0, neg, neg, 0.0], [2, 2], "fp32", floating=True)
        self.assertEqual(obj, {"values": [[0, 1], [1, 0]]})


class FourDMaskTest(unittest.TestCase):
    @staticmethod
    def causal_4d(pad_rows, q):
        """(B, 1, Q, K) attended flags built the way transformers builds them."""
        out = []
        for row in pad_rows:
            k = len(row)
            for i in range(q):
                out.extend(bool(row[j]) and j <= i + k - q for j in range(k))
        return out

    def test_causal_mask_is_recovered(self):
        pad = [[0, 1, 1, 1], [1, 1, 1, 1]]
        self.assertEqual(recover_2d_from_4d(self.causal_4d(pad, 4), [2, 1, 4, 4]), (flat(pad), True))

    def test_non_causal_mask_is_recovered(self):
        pad = [[1, 1, 0]]
        attended = [bool(x) for _ in range(3) for x in pad[0]]
        self.assertEqual(recover_2d_from_4d(attended, [1, 1, 3, 3]), ([1, 1, 0], False))

    def test_other_masks_are_not(self):
        attended = [True, False, False, False, True, False, False, True, True]  # a hole at (1, 0)
        self.assertIsNone(recover_2d_from_4d(attended, [1, 1, 3, 3]))

    def test_encodings(self):
        enc = Encoder("c")
        obj = enc.mask_4d([2, 1, 4, 4], True, recovered=([0, 1, 1, 1, 1, 1, 1, 1], True))
        self.assertEqual(obj, {"shape": [2, 1, 4, 4],
                               "from": {"lengths": [3, 4], "width": 4, "padding_side": "left"},
                               "style": "additive", "causal": True})
        obj = enc.mask_4d([1, 1, 2, 2], False, flat=[1, 0, 0, 1])
        self.assertEqual(obj, {"file": "c.attention_mask.npy", "rank": 4})
        self.assertEqual(enc.sidecars[-1].dtype, "bool")
        self.assertEqual(enc.sidecars[-1].values, [1, 0, 0, 1])


class PositionIdsEncodingTest(unittest.TestCase):
    def test_arange(self):
        enc = Encoder("c")
        self.assertEqual(enc.position_ids(flat([[0, 1, 2], [0, 1, 2]]), [2, 3], "int64", batch_size=2),
                         {"from": "arange"})

    def test_arange_broadcast_over_the_batch_is_written_as_it_is(self):
        enc = Encoder("c")
        self.assertEqual(enc.position_ids([0, 1, 2], [1, 3], "int64", batch_size=2),
                         {"values": [[0, 1, 2]]})

    def test_from_mask(self):
        enc = Encoder("c")
        mask = [0, 0, 1, 1, 1, 1, 1, 1]
        pos = [1, 1, 0, 1, 0, 1, 2, 3]
        self.assertEqual(enc.position_ids(pos, [2, 4], "int64", (mask, [2, 4]), batch_size=2),
                         {"from": "mask"})

    def test_packed_at_origin(self):
        enc = Encoder("c")
        self.assertEqual(enc.position_ids([0, 1, 2, 0, 1, 0, 1, 2, 3], [1, 9], "int64"),
                         {"from": "packed", "lengths": [3, 2, 4]})
        self.assertEqual(enc.position_ids([2, 3, 2, 3, 4], [1, 5], "int64", origin=2),
                         {"from": "packed", "lengths": [2, 3]})

    def test_offset_chunk_stays_dense(self):
        enc = Encoder("c")
        self.assertEqual(enc.position_ids([5, 6, 7, 8], [1, 4], "int64", batch_size=1),
                         {"values": [[5, 6, 7, 8]]})

    def test_mrope_planes(self):
        enc = Encoder("c")
        plane = [0, 1, 2, 0, 1]
        self.assertEqual(enc.position_ids(plane * 3, [3, 1, 5], "int64"),
                         {"from": "packed", "lengths": [3, 2], "mrope": True})
        different = [0, 1, 2, 3] + [0, 0, 1, 1] + [0, 1, 0, 1]
        self.assertEqual(enc.position_ids(different, [3, 1, 4], "int64"),
                         {"values": [[[0, 1, 2, 3]], [[0, 0, 1, 1]], [[0, 1, 0, 1]]]})

    def test_large_ids_go_to_a_sidecar(self):
        enc = Encoder("s", threshold=4)
        obj = enc.position_ids([3, 1, 4, 1, 5], [1, 5], "int32")
        self.assertEqual(obj, {"file": "s.position_ids.npy"})
        self.assertEqual(enc.sidecars[0].dtype, "int32")


class DocumentTest(unittest.TestCase):
    def doc(self):
        return {"format": FORMAT, "name": "n",
                "model": {"num_heads": 8, "head_dim": 64, "softcap": 50.0},
                "batch": {"attention_mask": {"values": [[1, 1, 0], [1, 1, 1]]}, "query_length": 3},
                "varlen": {"cu_seqlens_q": [0, 2, 5], "max_seqlen_q": {"tensor": 3}}}

    def test_dumps_is_valid_json_with_tables_on_lines(self):
        text = dumps(self.doc())
        self.assertEqual(json.loads(text), self.doc())
        self.assertTrue(text.startswith('{\n  "format": "attn-doctor/batch@1"'))
        self.assertIn('"cu_seqlens_q": [0, 2, 5]', text)

    def test_long_mask_rows_each_get_a_line(self):
        rows = [[1] * 40, [0] * 40]
        text = dumps({"values": rows})
        self.assertEqual(json.loads(text), {"values": rows})
        self.assertEqual(text.count("\n"), 5)

    def test_nan_is_refused(self):
        with self.assertRaises(ValueError):
            dumps({"softcap": float("nan")})

    def test_write_is_deterministic_and_writes_sidecars(self):
        enc = Encoder("call-000003", threshold=4)
        doc = self.doc()
        doc["batch"]["attention_mask"] = enc.mask([1, 0, 1, 0, 1, 1], [2, 3], "int64")
        del doc["varlen"]["cu_seqlens_q"]
        enc.cu_seqlens_q(doc["varlen"], [0, 1, 2, 3, 4, 5, 6], "int64")
        with temp_dir() as d:
            a = write_batch_file(os.path.join(d, "a", "call-000003.json"), doc, enc.sidecars)
            b = write_batch_file(os.path.join(d, "b", "call-000003.json"), doc, enc.sidecars)
            with open(a, "rb") as fa, open(b, "rb") as fb:
                self.assertEqual(fa.read(), fb.read())
            with open(a) as fh:
                loaded = json.load(fh)
            self.assertEqual(loaded["batch"]["attention_mask"], {"file": "call-000003.attention_mask.npy"})
            self.assertEqual(loaded["varlen"]["cu_seqlens_file"], "call-000003.cu_seqlens_q.npy")
            self.assertNotIn("cu_seqlens_q", loaded["varlen"])
            with open(os.path.join(d, "a", "call-000003.cu_seqlens_q.npy"), "rb") as fh:
                self.assertEqual(npy.decode(fh.read()), ([0, 1, 2, 3, 4, 5, 6], (7,), "int64"))
            self.assertEqual(sorted(os.listdir(os.path.join(d, "a"))),
                             ["call-000003.attention_mask.npy", "call-000003.cu_seqlens_q.npy",
                              "call-000003.json"])

    def test_refuses_a_document_without_the_format(self):
        with temp_dir() as d:
            with self.assertRaises(ValueError):
                write_batch_file(os.path.join(d, "x.json"), {"model": {}})


if __name__ == "__main__":
    unittest.main()
