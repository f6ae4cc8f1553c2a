"""The arithmetic of TMA reductions on numpy arrays (`combine`), typed by the descriptor's
tensor-map type, which is where the hardware takes signedness and width from.  The
read-modify-write of a box is `tma.py`'s.

Arithmetic (`combine`), per element `d` (GMEM) and `s` (SMEM): integer add wraps around; float
add rounds once to the element type (16-bit floats: the exact sum rounded to nearest even, which
f32 arithmetic then one rounding gives exactly); float min/max return the number when one side
is NaN (IEEE minNum, as PTX `min`/`max`; NaN handling and signed zeros were not measured on the
H200); `inc` is `d >= s ? 0 : d + 1` and `dec` is `d == 0 || d > s ? s : d - 1`, unsigned, as
`atom.inc`/`atom.dec` (both matched on the H200).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from asyncdsl.dtypes import (
    TMA_BFLOAT16,
    TMA_FLOAT16,
    TMA_FLOAT32,
    TMA_FLOAT64,
    TMA_INT32,
    TMA_INT64,
    TMA_UINT32,
    TMA_UINT64,
    bfloat16,
)
from asyncdsl.hw.reduction import PTX_OP

NUMPY_TYPES: dict[int, np.dtype] = {
    TMA_FLOAT16: np.dtype(np.float16),
    TMA_BFLOAT16: bfloat16.numpy,
    TMA_FLOAT32: np.dtype(np.float32),
    TMA_FLOAT64: np.dtype(np.float64),
    TMA_UINT32: np.dtype(np.uint32),
    TMA_INT32: np.dtype(np.int32),
    TMA_UINT64: np.dtype(np.uint64),
    TMA_INT64: np.dtype(np.int64),
}


def _add(d: np.ndarray, s: np.ndarray) -> np.ndarray:
    if d.dtype.itemsize == 2:
        # 16-bit floats: the f32 sum is close enough (24 >= 2 * 11 + 2 bits) that rounding it to
        # the element type once is the correctly rounded sum.
        return (d.astype(np.float32) + s.astype(np.float32)).astype(d.dtype)
    return d + s  # floats round once; integers wrap around


def _inc(d: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.where(d >= s, d.dtype.type(0), d + d.dtype.type(1))


def _dec(d: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.where((d == 0) | (d > s), s, d - d.dtype.type(1))


def _minimum(d: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.fmin(d, s) if d.dtype.kind not in "iu" else np.minimum(d, s)


def _maximum(d: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.fmax(d, s) if d.dtype.kind not in "iu" else np.maximum(d, s)


_ARITHMETIC: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": _add,
    "min": _minimum,
    "max": _maximum,
    "inc": _inc,
    "dec": _dec,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}


def combine(op: str, type_code: int, destination: np.ndarray, source: np.ndarray) -> np.ndarray:
    """What reduction `op` through a map of `type_code` leaves in GMEM, element by element.

    `destination` (GMEM) and `source` (SMEM) hold raw elements of the map's size (any dtype of
    that size: they are reinterpreted as the map's type).  Returns the new GMEM elements, as the
    map's numpy type.
    """
    element = NUMPY_TYPES[type_code]
    d = np.ascontiguousarray(destination).view(element)
    s = np.ascontiguousarray(source).view(element)
    with np.errstate(over="ignore", invalid="ignore"):
        return _ARITHMETIC[PTX_OP[op]](d, s).astype(element, copy=False)
