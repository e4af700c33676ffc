#!/usr/bin/env python3
"""Regenerates the .npy sidecars of the repro cases (arrays too large to keep readable in JSON).

Every array is a pure function of the numbers below, so running this script again reproduces the
committed files byte for byte:

    python3 repro_cases/tools/make_npy.py          # writes next to the cases in repro_cases/
    python3 repro_cases/tools/make_npy.py --check  # exits 1 if a committed file differs

Only numpy is needed.
"""
import argparse
import io
import sys
from pathlib import Path

import numpy as np

CASES = Path(__file__).resolve().parent.parent


def llamafactory_10452_position_ids() -> np.ndarray:
    """One neat_packing row (hiyouga/LlamaFactory#10452): three real samples whose positions
    restart at 0, then the collator's dummy padding tail whose position ids are all 0.
    Shape (1, 2652), int64 (what the collator emits)."""
    samples = [64, 48, 40]
    padding = 2500
    row = np.concatenate([np.arange(n, dtype=np.int64) for n in samples] + [np.zeros(padding, dtype=np.int64)])
    return row.reshape(1, -1)


def many_sequences_cu(num_sequences: int, length: int) -> np.ndarray:
    """cu_seqlens for `num_sequences` packed sequences of `length` tokens each, int32."""
    return (np.arange(num_sequences + 1, dtype=np.int64) * length).astype(np.int32)


ARRAYS = {
    "llamafactory-10452-position-ids.npy": llamafactory_10452_position_ids,
    "packed-65600-sequences-cu-seqlens.npy": lambda: many_sequences_cu(65600, 2),
    "packed-32800-sequences-cu-seqlens.npy": lambda: many_sequences_cu(32800, 2),
    "packed-15000-sequences-of-8-cu-seqlens.npy": lambda: many_sequences_cu(15000, 8),
    "packed-12288-sequences-of-64-cu-seqlens.npy": lambda: many_sequences_cu(12288, 64),
}


def encode(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    status = 0
    for name, make in ARRAYS.items():
        data = encode(make())
        path = CASES / name
        if args.check:
            if not path.exists() or path.read_bytes() != data:
                print(f"{path}: differs from what make_npy.py generates", file=sys.stderr)
                status = 1
        else:
            path.write_bytes(data)
            print(f"wrote {path} ({len(data)} bytes)")
    return status


if __name__ == "__main__":
    sys.exit(main())
