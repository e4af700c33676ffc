"""Writing attn-doctor batch files (docs/spec/batch-format.md, `attn-doctor/batch@1`).

`Encoder` turns host copies of masks, position ids and cu_seqlens into the format's
encodings, choosing the most specific one that reproduces the values exactly:

  mask          lengths {"lengths", "width", "padding_side"}  when every row is one block of
                ones on a common side; else dense {"values"}; else {"file"} past the threshold;
                4-D masks as {"shape", "from", "style", "causal"} when the 2-D mask they were
                built from can be recovered exactly, else a 4-D {"file"}.
  position ids  {"from": "arange"}, {"from": "mask"}, {"from": "packed", "lengths"}, each with
                "mrope": true when three identical planes were given; else dense or file.
  cu_seqlens    inline; `cu_seqlens_file` for a long cu_seqlens_q.

Arrays with more elements than `threshold` go to `.npy` sidecars next to the batch file,
named `<stem>.<what>.npy` and referenced relative to it. Output is deterministic: the same
call gives byte-identical files (fixed key order, no timestamps).
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import npy

FORMAT = "attn-doctor/batch@1"
DEFAULT_THRESHOLD = 4096  # elements; larger arrays go to .npy sidecars


class Sidecar:
    __slots__ = ("name", "values", "shape", "dtype")

    def __init__(self, name: str, values: List[int], shape: Sequence[int], dtype: str):
        self.name, self.values, self.shape, self.dtype = name, values, list(shape), dtype


def _reshape(flat: List[Any], shape: Sequence[int]) -> Any:
    if len(shape) == 0:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0] if shape[0] else 0
    return [_reshape(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _int_values(flat: List[Any]) -> List[int]:
    return [int(v) for v in flat]


class Encoder:
    """Encodes arrays for one batch file; collects the sidecars it decided to write."""

    def __init__(self, stem: str, threshold: int = DEFAULT_THRESHOLD):
        self.stem = stem
        self.threshold = threshold
        self.sidecars: List[Sidecar] = []

    def _sidecar(self, what: str, flat: List[int], shape: Sequence[int], dtype: str) -> str:
        if not npy.supported_dtype(dtype):
            dtype = "int64"
        name = f"{self.stem}.{what}.npy"
        self.sidecars.append(Sidecar(name, flat, shape, dtype))
        return name

    # -- masks --------------------------------------------------------------------------

    def mask(self, flat: List[Any], shape: Sequence[int], dtype: str,
             floating: bool = False) -> Dict[str, Any]:
        """Mask object for a host copy of a mask of rank 1 to 3 (see `mask_4d` for rank 4)."""
        shape = [int(s) for s in shape]
        if floating:
            # An additive float mask: what unpad sees through nonzero() is where it is
            # masked; write those positions (the spec's mask files are integer/bool).
            flat = [1 if v != 0 else 0 for v in flat]
            dtype = "int8"
        values = _int_values(flat)
        if len(shape) == 2:
            lengths = _lengths_encoding(values, shape)
            if lengths is not None:
                return lengths
        if len(values) > self.threshold:
            obj: Dict[str, Any] = {"file": self._sidecar("attention_mask", values, shape, dtype)}
        else:
            obj = {"values": _reshape(values, shape)}
        if len(shape) != 2:
            obj["rank"] = len(shape)
        return obj

    def mask_4d(self, shape: Sequence[int], floating: bool,
                recovered: Optional[Tuple[List[int], bool]] = None,
                flat: Optional[List[Any]] = None) -> Dict[str, Any]:
        """Mask object for a (B, 1, Q, K) mask: built from its recovered 2-D mask (see
        `recover_2d_from_4d`), else every entry in a file. Such a file holds what
        torch.nonzero() on the real tensor selects (the masked entries of an additive mask)."""
        shape = [int(s) for s in shape]
        if recovered is not None:
            from_2d, causal = recovered
            return {"shape": shape,
                    "from": self.mask(from_2d, [shape[0], shape[3]], "int8"),
                    "style": "additive" if floating else "boolean",
                    "causal": causal}
        values = [1 if v != 0 else 0 for v in (flat or [])]
        return {"file": self._sidecar("attention_mask", values, shape,
                                      "int8" if floating else "bool"), "rank": 4}

    # -- position ids -------------------------------------------------------------------

    def position_ids(self, flat: List[Any], shape: Sequence[int], dtype: str,
                     mask_2d: Optional[Tuple[List[int], List[int]]] = None,
                     origin: int = 0, batch_size: Optional[int] = None) -> Dict[str, Any]:
        """Position-ids object. `batch_size` is q's B: {"from": "arange"} is only used when
        the ids have one row per sequence of the batch (the loader makes B rows of it),
        so a (1, S) tensor broadcast over B > 1 rows is written as it is."""
        shape = [int(s) for s in shape]
        values = _int_values(flat)
        mrope = False
        if len(shape) == 3 and shape[0] == 3:
            plane = len(values) // 3
            if values[:plane] == values[plane:2 * plane] == values[2 * plane:]:
                values, shape, mrope = values[:plane], shape[1:], True
        obj = _position_ids_encoding(values, shape, mask_2d, origin, batch_size)
        if obj is None:
            if len(values) > self.threshold:
                obj = {"file": self._sidecar("position_ids", values, shape, dtype)}
            else:
                obj = {"values": _reshape(values, shape)}
        if mrope:
            obj["mrope"] = True
        return obj

    # -- varlen -------------------------------------------------------------------------

    def cu_seqlens_q(self, block: Dict[str, Any], values: List[int], dtype: str) -> None:
        if len(values) > self.threshold:
            block["cu_seqlens_file"] = self._sidecar("cu_seqlens_q", values, [len(values)], dtype)
        else:
            block["cu_seqlens_q"] = values


def _lengths_encoding(values: List[int], shape: Sequence[int]) -> Optional[Dict[str, Any]]:
    """{"lengths", "width", "padding_side"} when the 2-D mask is exactly that, else None."""
    rows, width = shape
    if rows == 0 or any(v not in (0, 1) for v in values):
        return None
    lengths: List[int] = []
    left_ok = right_ok = True
    for r in range(rows):
        row = values[r * width:(r + 1) * width]
        n = sum(row)
        lengths.append(n)
        if row != [1] * n + [0] * (width - n):
            right_ok = False
        if row != [0] * (width - n) + [1] * n:
            left_ok = False
    if not (left_ok or right_ok):
        return None
    # Full and empty rows fit both sides; a strictly left-padded row decides for "left".
    side = "right" if right_ok else "left"
    return {"lengths": lengths, "width": width, "padding_side": side}


def _position_ids_encoding(values: List[int], shape: Sequence[int],
                           mask_2d: Optional[Tuple[List[int], List[int]]],
                           origin: int, batch_size: Optional[int]) -> Optional[Dict[str, Any]]:
    if len(shape) != 2 or shape[1] == 0:
        return None
    rows, width = shape
    arange = list(range(width))
    if (batch_size is None or rows == batch_size) and \
            all(values[r * width:(r + 1) * width] == arange for r in range(rows)):
        return {"from": "arange"}
    if mask_2d is not None and list(mask_2d[1]) == [rows, width]:
        mask = mask_2d[0]
        if all(m in (0, 1) for m in mask):
            expected: List[int] = []
            for r in range(rows):
                running = 0
                for m in mask[r * width:(r + 1) * width]:
                    running += m
                    # generate's convention: cumsum(mask) - 1, padded slots set to 1
                    expected.append(running - 1 if m else 1)
            if expected == values:
                return {"from": "mask"}
    if rows == 1:
        lengths: List[int] = []
        expect_next = None
        for v in values:
            if v == origin:
                lengths.append(1)
            elif expect_next is not None and v == expect_next:
                lengths[-1] += 1
            else:
                return None
            expect_next = v + 1
        if len(lengths) > 1:
            return {"from": "packed", "lengths": lengths}
    return None


def recover_2d_from_4d(attended: List[bool], shape: Sequence[int]
                       ) -> Optional[Tuple[List[int], bool]]:
    """The 2-D padding mask a (B, 1, Q, K) mask was built from, and whether it is causal
    (bottom-right aligned: query i sees keys j <= i + K - Q), or None when the 4-D mask is
    not of that form. Pure Python, for masks already on the host."""
    b, h, q, k = shape
    if h != 1 or q == 0:
        return None
    offset = k - q
    from_2d: List[int] = []
    for bi in range(b):
        base = bi * q * k
        # every key a query can see is seen by the last query row
        col = [1 if any(attended[base + i * k + j] for i in range(q)) else 0 for j in range(k)]
        from_2d.extend(col)
    for causal in (True, False):
        ok = True
        for bi in range(b):
            base = bi * q * k
            pad = from_2d[bi * k:(bi + 1) * k]
            for i in range(q):
                row = attended[base + i * k: base + (i + 1) * k]
                want = [bool(pad[j]) and (not causal or j <= i + offset) for j in range(k)]
                if row != want:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return from_2d, causal
    return None


# -- JSON output ---------------------------------------------------------------------------

_INLINE_WIDTH = 96


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(", ", ": "), allow_nan=False, ensure_ascii=False)


def _is_scalar(x: Any) -> bool:
    return not isinstance(x, (dict, list))


def dumps(obj: Any, indent: int = 0) -> str:
    """JSON text with objects broken over lines, short values and lists of scalars inline,
    and a list of lists one inner list per line (masks and position ids read as tables)."""
    pad = "  " * (indent + 1)
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError("batch files cannot hold NaN or infinity")
    if isinstance(obj, dict):
        text = _compact(obj)
        if len(text) + 2 * indent <= _INLINE_WIDTH or not obj:
            return text
        items = [f"{pad}{json.dumps(key)}: {dumps(value, indent + 1)}" for key, value in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(obj, list):
        if all(_is_scalar(x) for x in obj):
            return _compact(obj)
        text = _compact(obj)
        if len(text) + 2 * indent <= _INLINE_WIDTH:
            return text
        return "[\n" + ",\n".join(pad + dumps(x, indent + 1) for x in obj) + "\n" + "  " * indent + "]"
    return _compact(obj)


def write_batch_file(path: str, doc: Dict[str, Any], sidecars: Sequence[Sidecar] = ()) -> str:
    """Write `doc` (and its sidecars, into the same folder) to `path`; returns the path.
    Files are written to a temporary name first so a crash mid-write leaves no half file."""
    if doc.get("format") != FORMAT:
        raise ValueError(f"batch document must start with format {FORMAT!r}")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    for car in sidecars:
        _atomic_write(os.path.join(folder, car.name), npy.encode(car.values, car.shape, car.dtype))
    _atomic_write(path, (dumps(doc) + "\n").encode("utf-8"))
    return path


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
