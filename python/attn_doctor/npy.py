"""A small NumPy `.npy` (format 1.0) writer and reader for the integer/bool arrays that
batch files keep in sidecars. Own code so that capture needs no numpy and writes
byte-identical files for identical arrays."""
from __future__ import annotations

import ast
import struct
from typing import List, Sequence, Tuple

MAGIC = b"\x93NUMPY"

# batch-format dtype name -> (numpy descr, struct code)
_FORMATS = {
    "bool": ("|b1", "?"),
    "int8": ("|i1", "b"),
    "uint8": ("|u1", "B"),
    "int16": ("<i2", "h"),
    "int32": ("<i4", "i"),
    "int64": ("<i8", "q"),
}


def supported_dtype(dtype: str) -> bool:
    return dtype in _FORMATS


def encode(values: Sequence, shape: Sequence[int], dtype: str) -> bytes:
    """Bytes of a C-order `.npy` file holding `values` (flat, row-major) with `shape`."""
    if dtype not in _FORMATS:
        raise ValueError(f"npy: unsupported dtype {dtype!r}")
    count = 1
    for s in shape:
        count *= int(s)
    if count != len(values):
        raise ValueError(f"npy: {len(values)} values for shape {tuple(shape)}")
    descr, code = _FORMATS[dtype]
    dims = [str(int(s)) for s in shape]
    shape_text = "(%s,)" % dims[0] if len(dims) == 1 else "(%s)" % ", ".join(dims)
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    # The header (with magic, version and length) is padded with spaces to a multiple of 64
    # bytes and ends with a newline, as the format specification asks.
    total = len(MAGIC) + 2 + 2 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    if code == "?":
        data = bytes(1 if v else 0 for v in values)
    else:
        data = struct.pack("<%d%s" % (len(values), code), *(int(v) for v in values))
    return MAGIC + b"\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + data


def decode(blob: bytes) -> Tuple[List[int], Tuple[int, ...], str]:
    """(flat values, shape, dtype name) of a `.npy` file written by `encode` (tests use it)."""
    if blob[:6] != MAGIC:
        raise ValueError("npy: bad magic")
    major = blob[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", blob[8:10])
        start = 10
    else:
        (hlen,) = struct.unpack("<I", blob[8:12])
        start = 12
    header = ast.literal_eval(blob[start:start + hlen].decode("latin1"))
    if header["fortran_order"]:
        raise ValueError("npy: fortran order not supported")
    by_descr = {d: (name, c) for name, (d, c) in _FORMATS.items()}
    descr = header["descr"].replace("=", "<")
    if descr not in by_descr:
        raise ValueError(f"npy: unsupported descr {descr}")
    name, code = by_descr[descr]
    shape = tuple(header["shape"])
    count = 1
    for s in shape:
        count *= s
    data = blob[start + hlen:]
    if code == "?":
        values = [1 if b else 0 for b in data[:count]]
    else:
        values = list(struct.unpack("<%d%s" % (count, code), data[:count * struct.calcsize(code)]))
    return values, shape, name
