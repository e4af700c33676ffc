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
../hostile/import/: inputs import must refuse with exit 2 and a precise message (each is read
    by a tests/cli/import-hostile-*.test): headers claiming huge shapes (nothing is allocated for
    them), a max_seqlen of three values, a record of a non-varlen call, a record without the
    cu_seqlens values it needs, JSON nested too deep, a q that is not (total, heads, dim).
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


def hostile():
    out = HERE.parent / "hostile" / "import"
    # q.npy announcing 2^40 x 16 x 128 fp16 values (4 PiB) in a 128-byte file
    write(out / "huge-q.npy", npy([1 << 40, 16, 128], "<f2", b""))
    # cu_seqlens announcing 2^30 int32 values: past the 2^25 elements one array may hold
    write(out / "huge-cu.npy", npy([1 << 30], "<i4", b""))
    # a dimension past 2^40
    write(out / "huge-dim.npy", npy([1 << 62], "<i4", b""))
    write(out / "max-seqlen-three.npy", ints([3], [64, 64, 64]))
    # a cu_seqlens value past the +-2^62 the batch format allows: only the loader refuses it
    write(out / "cu-past-2-62.npy", ints([3], [0, 8, (1 << 63) - 1], "q"))
    write(out / "not-npy.npy", b"PK\x03\x04 a torch.save zip, not an .npy")
    base = {"rank": 0, "call_index": 0, "operator": "flash_attn_varlen_func",
            "positional_args": [{"name": "q", "shape": [562, 16, 96], "dtype": "bfloat16"},
                                {"name": "k", "shape": [562, 16, 96], "dtype": "bfloat16"},
                                {"name": "v", "shape": [562, 16, 96], "dtype": "bfloat16"},
                                {"name": "cu_seqlens_q", "shape": [5], "dtype": "int32"}]}
    import json
    write(out / "record-cu-no-values.json", (json.dumps(base, indent=1) + "\n").encode())
    dense = dict(base, operator="flash_attn_func")
    write(out / "record-not-varlen.json", (json.dumps(dense, indent=1) + "\n").encode())
    four_d = json.loads(json.dumps(base))
    four_d["positional_args"][0]["shape"] = [2, 281, 16, 96]
    four_d["positional_args"][3]["shape"] = [2]
    write(out / "record-q-rank4.json", (json.dumps(four_d, indent=1) + "\n").encode())
    bad = json.loads(json.dumps(base))
    bad["positional_args"][0]["shape"] = "562x16x96"
    write(out / "record-shape-string.json", (json.dumps(bad, indent=1) + "\n").encode())
    write(out / "record-deep.json", ("[" * 100 + "]" * 100 + "\n").encode())


if __name__ == "__main__":
    hostile()
    dump_1311("dump-1311", 64)
    dump_1311("dump-1311-short", 48)
    small()
