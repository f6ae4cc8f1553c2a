"""TMA reduction kernels, their inputs and an independent numpy reference, shared by the CPU
tests (interpreter, PTX) and the GPU tests.

The reference works on Python integers for integer types (wraparound by an explicit modulus,
signedness by explicit reinterpretation) and in float64 for floats (rounded once to the element
type: float64 holds the exact sum of two 16-bit floats, and rounding an f64 sum of two f32 to
f32 is the correctly rounded f32 sum since 53 >= 2 * 24 + 2), so it shares no code with
`asyncdsl.hw.reduction.combine`.
"""

from __future__ import annotations

import numpy as np

import asyncdsl as ad
from asyncdsl.hw import reduction

ROWS, COLS = 16, 64
PAIRS = [(op, dtype) for op, table in reduction.ALLOWED.items() for dtype in table]
PAIR_IDS = [f"{op}-{dtype}" for op, dtype in PAIRS]
ORDER_FREE_OPS = ("min", "max", "umin", "umax", "smin", "smax", "and", "or", "xor")


@ad.kernel(grid=lambda x, y, OP: (x.shape[0] // y.shape[0],))
def reduce_tiles(x, y, OP: ad.constexpr):
    """CTA i loads tile i of `x` and reduces it into all of `y`: every CTA into the same tile."""
    rows = y.shape[0]
    tile = ad.smem(y.shape, x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[ad.ds(ad.program_id(0) * rows, rows), :], tile, barrier=loaded)
    loaded.wait()
    ad.async_copy(tile, y.at[...], reduction=OP)
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def reduce_at_row(x, y, ROW: ad.constexpr, OP: ad.constexpr):
    """One CTA reduces all of `x` into `y` at row ROW (the box may run past y's end)."""
    tile = ad.smem(x.shape, x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=loaded)
    loaded.wait()
    ad.async_copy(tile, y.at[ad.ds(ROW, x.shape[0]), :], reduction=OP)
    ad.await_async_copy(0)


def random_operands(op: str, dtype: ad.DType, shape, rng) -> np.ndarray:
    """Inputs for `op`: any bits for integers (wraparound, signs); for floats magnitudes in
    [1/4, 8) of either sign (no NaN, no subnormal inputs: how the hardware treats those was not
    measured); small values for inc/dec so that every branch of atom.inc/dec is taken."""
    if op in ("inc", "dec"):
        return rng.integers(0, 24, size=shape).astype(dtype.numpy)
    if dtype.is_float:
        magnitudes = rng.uniform(0.25, 8.0, size=shape)
        return (magnitudes * rng.choice([-1.0, 1.0], size=shape)).astype(dtype.numpy)
    raw = rng.integers(0, 256, size=(*shape, dtype.itemsize), dtype=np.uint8)
    return raw.view(dtype.numpy).reshape(shape)


def exact_float_operands(dtype: ad.DType, shape, rng) -> np.ndarray:
    """Float inputs whose sums are exact in any order: integers in [-4, 4].  Every partial sum of
    up to 64 of them is an integer of magnitude at most 256, which every float type holds
    exactly (bfloat16 has the fewest significand bits, 8)."""
    return rng.integers(-4, 5, size=shape).astype(dtype.numpy)


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _integer_step(op: str, dtype: ad.DType, d: int, s: int) -> int:
    """One reduction step on unsigned bit patterns `d` (GMEM) and `s` (SMEM)."""
    bits = dtype.bits
    signed = op in ("smin", "smax") or (op in ("min", "max") and dtype.kind == "int")
    key = (lambda v: _signed(v, bits)) if signed else (lambda v: v)
    if op == "add":
        return (d + s) % (1 << bits)
    if op.endswith("min"):
        return min(d, s, key=key)
    if op.endswith("max"):
        return max(d, s, key=key)
    if op == "inc":
        return 0 if d >= s else d + 1
    if op == "dec":
        return s if d == 0 or d > s else d - 1
    return {"and": d & s, "or": d | s, "xor": d ^ s}[op]


def reference_step(op: str, dtype: ad.DType, d: np.ndarray, s: np.ndarray) -> np.ndarray:
    """What one reduction of `s` into `d` leaves, computed independently of asyncdsl."""
    if dtype.is_float:
        wide_d, wide_s = d.astype(np.float64), s.astype(np.float64)
        if op == "add":
            return (wide_d + wide_s).astype(dtype.numpy)
        return (np.fmin if op == "min" else np.fmax)(wide_d, wide_s).astype(dtype.numpy)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    flat_d = d.view(unsigned).reshape(-1).tolist()
    flat_s = s.view(unsigned).reshape(-1).tolist()
    result = [_integer_step(op, dtype, a, b) for a, b in zip(flat_d, flat_s)]
    return np.array(result, dtype=unsigned).view(dtype.numpy).reshape(d.shape)


def reference_fold(op: str, dtype: ad.DType, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`y` after the tiles of `x` are reduced into it one after another, in CTA order."""
    rows = y.shape[0]
    for start in range(0, x.shape[0], rows):
        y = reference_step(op, dtype, y, x[start : start + rows])
    return y
