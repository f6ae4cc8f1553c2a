"""Element-level semantics the model needs: reductions and the test data that keeps them exact.

TMA reductions combine each SMEM element into GMEM (README table): `add` wraps for integers,
`min`/`max` follow the element type's signedness, `smin`/`smax`/`umin`/`umax` compare the bits
as signed/unsigned, `inc`/`dec` are PTX's atom.inc/atom.dec on unsigned 32-bit values, and
`and`/`or`/`xor` are bitwise.  Float reductions are fed small integers, so every order of
additions gives the same bits and min/max never meet NaN or a signed zero.
"""

from __future__ import annotations

import numpy as np

from .layout import ElementType

ALLOWED_REDUCTIONS = {
    "add": ("float16", "bfloat16", "float32", "float64", "int32", "uint32", "int64", "uint64"),
    "min": ("float16", "bfloat16", "int32", "int64", "uint32", "uint64"),
    "max": ("float16", "bfloat16", "int32", "int64", "uint32", "uint64"),
    "smin": ("int32", "uint32", "int64", "uint64"),
    "smax": ("int32", "uint32", "int64", "uint64"),
    "umin": ("int32", "uint32", "int64", "uint64"),
    "umax": ("int32", "uint32", "int64", "uint64"),
    "inc": ("int32", "uint32"),
    "dec": ("int32", "uint32"),
    "and": ("int32", "uint32", "int64", "uint64"),
    "or": ("int32", "uint32", "int64", "uint64"),
    "xor": ("int32", "uint32", "int64", "uint64"),
}
ORDER_DEPENDENT = ("inc", "dec")  # several CTAs reducing into one element: the result depends on order


def reduction_allowed(op: str, element: ElementType) -> bool:
    return element.name in ALLOWED_REDUCTIONS.get(op, ())


def _as(values: np.ndarray, kind: str) -> np.ndarray:
    bits = values.dtype.itemsize * 8
    return values.view(np.dtype(f"{'i' if kind == 'int' else 'u'}{bits // 8}"))


def reduce(op: str, element: ElementType, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """What a TMA reduction leaves in GMEM elements `old` given SMEM elements `new`."""
    if element.kind == "float":
        wide_old, wide_new = old.astype(np.float64), new.astype(np.float64)
        combined = {"add": np.add, "min": np.minimum, "max": np.maximum}[op](wide_old, wide_new)
        return combined.astype(element.numpy)
    natural = element.kind
    if op in ("add", "and", "or", "xor"):
        a, b = _as(old, "uint"), _as(new, "uint")
        result = {"add": np.add, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](a, b)
        return result.view(element.numpy)
    if op in ("min", "max", "smin", "smax", "umin", "umax"):
        kind = {"s": "int", "u": "uint"}.get(op[0], natural)
        a, b = _as(old, kind), _as(new, kind)
        result = np.minimum(a, b) if op.endswith("min") else np.maximum(a, b)
        return result.view(element.numpy)
    a, b = _as(old, "uint").astype(np.uint64), _as(new, "uint").astype(np.uint64)
    if op == "inc":
        result = np.where(a >= b, 0, a + 1)
    else:
        result = np.where((a == 0) | (a > b), b, a - 1)
    return result.astype(_as(old, "uint").dtype).view(element.numpy)


def random_elements(shape, element: ElementType, rng: np.random.Generator, exact: bool = False) -> np.ndarray:
    """Random elements of `shape`: random bits (copies move bits, NaN payloads and all); with
    `exact`, floats are small integers (see the module docstring); 4-bit elements are unpacked
    (one per byte, high nibble clear), as numpy holds them."""
    shape = tuple(shape)
    if element.packed:
        return rng.integers(0, 16, size=shape, dtype=np.uint8).view(element.numpy)
    if exact and element.kind == "float":
        return rng.integers(-8, 9, size=shape).astype(np.float64).astype(element.numpy)
    raw = rng.integers(0, 256, size=(*shape, element.numpy.itemsize), dtype=np.uint8)
    return raw.view(element.numpy).reshape(shape)


def poison(shape, element: ElementType) -> np.ndarray:
    """An output array no copy fills by chance: every byte 0xA5 (4-bit: every element 0x5)."""
    out = np.empty(tuple(shape), element.numpy)
    out.view(np.uint8)[...] = 0x05 if element.packed else 0xA5
    return out
