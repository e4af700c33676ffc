"""The mask and position-ids encodings computed with torch on the tensors' device
(records.summarise_mask_2d / summarise_position_ids) give exactly what the host encoder
(batchfile.Encoder) writes for the same values, or nothing where only the values describe
the tensor. Seeded random sweep; needs torch (skipped, with the reason, without it)."""
import random
import unittest

try:
    import torch
except ImportError:  # the package never needs torch; these tests compare against it
    torch = None

from attn_doctor import records
from attn_doctor.batchfile import Encoder

NEEDS_TORCH = unittest.skipIf(torch is None, "torch is not installed in this Python")
INLINE = 1 << 62


def random_mask(rng):
    rows, width = rng.randint(1, 5), rng.randint(1, 9)
    kind = rng.choice(["right", "left", "mixed", "random", "segments", "full", "empty-rows"])
    out = []
    for _ in range(rows):
        n = rng.randint(0, width)
        if kind in ("right", "mixed") and (kind == "right" or rng.random() < 0.5):
            row = [1] * n + [0] * (width - n)
        elif kind in ("left", "mixed"):
            row = [0] * (width - n) + [1] * n
        elif kind == "full":
            row = [1] * width
        elif kind == "empty-rows":
            row = [0] * width if rng.random() < 0.5 else [1] * width
        elif kind == "segments":
            row = [rng.randint(0, 3) for _ in range(width)]
        else:
            row = [rng.randint(0, 1) for _ in range(width)]
        out.append(row)
    return out


def random_positions(rng, mask, origin):
    rows, width = len(mask), len(mask[0])
    kind = rng.choice(["arange", "from-mask", "packed", "random", "broadcast"])
    if kind == "arange":
        return [list(range(width)) for _ in range(rows)]
    if kind == "from-mask":
        out = []
        for row in mask:
            running, ids = 0, []
            for m in row:
                running += 1 if m else 0
                ids.append(running - 1 if m else 1)
            out.append(ids)
        return out
    if kind in ("packed", "broadcast"):
        ids = []
        while len(ids) < width:
            n = rng.randint(1, 4)
            ids += list(range(origin, origin + n))
        ids = ids[:width]
        return [ids] if kind == "packed" else [ids for _ in range(rows)]
    return [[rng.randint(0, width) for _ in range(width)] for _ in range(rows)]


@NEEDS_TORCH
class DeviceEncodingTest(unittest.TestCase):
    def test_masks(self):
        rng = random.Random(1234)
        summarised = 0
        for _ in range(600):
            values = random_mask(rng)
            dtype = rng.choice([torch.int64, torch.int32, torch.bool]) if \
                all(v in (0, 1) for row in values for v in row) else torch.int64
            t = torch.tensor(values, dtype=dtype)
            host = Encoder("x", INLINE).mask([int(v) for row in values for v in row],
                                             [len(values), len(values[0])], "int64")
            device = records.summarise_mask_2d(t)
            if device is None:
                self.assertNotIn("lengths", host, values)
            else:
                summarised += 1
                self.assertEqual(device, host, values)
        self.assertGreater(summarised, 150)   # the sweep reaches the lengths encoding

    def test_position_ids(self):
        rng = random.Random(99)
        found = {"arange": 0, "mask": 0, "packed": 0, None: 0}
        for _ in range(800):
            mask = random_mask(rng)
            origin = rng.choice([0, 0, 2])
            ids = random_positions(rng, mask, origin)
            rows, width = len(ids), len(ids[0])
            batch_size = rng.choice([rows, None, rows + 1])
            mrope = rng.random() < 0.2
            pos = torch.tensor([ids] * 3 if mrope else ids, dtype=torch.int64)
            shape = list(pos.shape)
            flat = pos.flatten().tolist()
            mask_t = torch.tensor(mask, dtype=torch.int64) if len(mask) == rows else None
            mask_2d = ([v for row in mask for v in row], [len(mask), len(mask[0])]) if mask_t is not None else None
            host = Encoder("x", INLINE).position_ids(flat, shape, "int64", mask_2d, origin, batch_size)
            device = records.summarise_position_ids(pos, mask_t, origin, batch_size)
            if device is None:
                self.assertNotIn("from", host, (ids, mask, origin, batch_size))
                found[None] += 1
            else:
                self.assertEqual(device, host, (ids, mask, origin, batch_size))
                found[device["from"]] += 1
        for kind, n in found.items():
            self.assertGreater(n, 20, f"the sweep reaches {kind}: {found}")


if __name__ == "__main__":
    unittest.main()
