import unittest

from attn_doctor import npy


class NpyTest(unittest.TestCase):
    def test_header_is_the_format_1_0_layout(self):
        blob = npy.encode([0, 5, 9], [3], "int32")
        self.assertEqual(blob[:8], b"\x93NUMPY\x01\x00")
        header_len = int.from_bytes(blob[8:10], "little")
        self.assertEqual((10 + header_len) % 64, 0)
        header = blob[10:10 + header_len].decode("latin1")
        self.assertEqual(header.rstrip(), "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }")
        self.assertTrue(header.endswith("\n"))
        self.assertEqual(blob[10 + header_len:], b"\x00\x00\x00\x00\x05\x00\x00\x00\x09\x00\x00\x00")

    def test_round_trip_of_every_dtype(self):
        cases = [([1, 0, 1, 1], (2, 2), "bool"), ([-3, 4], (2,), "int8"), ([250], (1,), "uint8"),
                 ([-7, 7], (1, 2), "int16"), ([0, 4, 7], (3,), "int32"),
                 ([1, 2, 3, 4, 5, 2 ** 40], (1, 2, 3), "int64"), ([9], (), "int64")]
        for values, shape, dtype in cases:
            with self.subTest(dtype=dtype, shape=shape):
                self.assertEqual(npy.decode(npy.encode(values, shape, dtype)), (values, shape, dtype))

    def test_rejects_a_shape_that_does_not_hold_the_values(self):
        with self.assertRaises(ValueError):
            npy.encode([1, 2, 3], [2, 2], "int32")
        with self.assertRaises(ValueError):
            npy.encode([1.5], [1], "fp32")


if __name__ == "__main__":
    unittest.main()
