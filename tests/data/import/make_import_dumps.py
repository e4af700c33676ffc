#!/usr/bin/env python3
"""Writes the call dumps that the `attn-doctor import` tests read (tests/cli/import-*.test,
tests/cli/import_roundtrip.sh). Standard library only; every file is a pure function of the
numbers below, so running it again reproduces the committed files byte for byte.

    python3 tests/data/import/make_import_dumps.py

dump-1311/, dump-1311-short/: the form of the repro in Dao-AILab/flash-attention#1311: the
    varlen arguments saved one per file with np.save (cu_seqlens_q/k.npy, max_seqlen_q/k.npy,
    int32, max_seqlen as 0-d arrays). The thread shows the file names, the int32 casts,
    head_dim 128 (softmax_scale 0.0883883 = 1/sqrt(128)), fp16, causal=False, and cuda-gdb's
    launch grid (1, 12288, 16): 12288 sequences of 16 heads, each at most one 64-row block. The
    values are not in the thread: these are ours (lengths 1 to 64 in a fixed pattern).
    dump-1311-short/ passes a max_seqlen_q below the longest segment.
small/: a dump with the tensors too (their headers only are read): q, k, v, dout as fp16 .npy,
    cu_seqlens_q as int64 (np.save of a tensor built without dtype=torch.int32).
"""
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent


def npy(shape, descr, payload: bytes) -> bytes:
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


def ints(shape, values, code="i"):
    descr = {"i": "<i4", "q": "<i8"}[code]
    return npy(shape, descr, struct.pack("<%d%s" % (len(values), code), *values))


def zeros(shape, descr, size):
    n = 1
    for d in shape:
        n *= d
    return npy(shape, descr, bytes(n * size))


def write(path: Path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def dump_1311(folder: str, max_q: int):
    lengths = [1 + (7 * i) % 64 for i in range(12288)]  # 1..64, longest 64
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    write(HERE / folder / "cu_seqlens_q.npy", ints([len(cu)], cu))
    write(HERE / folder / "cu_seqlens_k.npy", ints([len(cu)], cu))
    write(HERE / folder / "max_seqlen_q.npy", ints([], [max_q]))
    write(HERE / folder / "max_seqlen_k.npy", ints([], [max(lengths)]))


def small():
    total, heads, kv_heads, dim = 40, 4, 2, 8
    write(HERE / "small" / "q.npy", zeros([total, heads, dim], "<f2", 2))
    write(HERE / "small" / "k.npy", zeros([total, kv_heads, dim], "<f2", 2))
    write(HERE / "small" / "v.npy", zeros([total, kv_heads, dim], "<f2", 2))
    write(HERE / "small" / "dout.npy", zeros([total, heads, dim], "<f2", 2))
    write(HERE / "small" / "cu_seqlens_q.npy", ints([4], [0, 10, 25, 40], "q"))
    write(HERE / "small" / "max_seqlen_q.npy", ints([], [15]))


if __name__ == "__main__":
    dump_1311("dump-1311", 64)
    dump_1311("dump-1311-short", 48)
    small()
