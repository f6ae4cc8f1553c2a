"""What one wgmma instruction computes, bit for bit as far as it is known (docs/register-tiles.md,
"wgmma numerics").

Products of two inputs are exact (bf16, f16, tf32 and fp8 significands multiply into at most 22
bits).  Hopper's tensor cores do not sum them as IEEE arithmetic would.  The model here is the
one that matched the H200 best among those probed: for each instruction (its K products and the
old accumulator), align every term to the largest one's exponent, truncate each toward zero to
26 significant bits of that scale (two more than float32 keeps), add the truncated terms
exactly, and truncate the sum toward zero to float32.  It is bit-identical to the H200 on 99.6 %
of random normal bf16 outputs (K = 64 and 256; docs/hardware.md §14.2); on inputs whose
products and partial sums are integers below 2**24 (or any exactly representable values of that
kind) every model agrees and it is exact, which is what the tests compare bit for bit.
8-bit float inputs (e4m3, e5m2) are summed more coarsely, by a model that gave the H200's bits
on every one of 393,216 random normal outputs (one k32 instruction and chains of four; e4m3 ×
e4m3 and e5m2 × e4m3; docs/hardware.md §14.2): the terms (the K products and the old
accumulator) are aligned to the largest exponent among them, a product's exponent being the sum
of its operands' (its significand, up to 4, is not looked at), and each is truncated toward zero
to 2**(that exponent - 13); the sum of the truncated terms is truncated toward zero to 14
significant bits.  So every fp8 wgmma result has at most 14 significant bits.
Integer wgmma (s8/u8 → s32) is exact, wrapping like the hardware's 32-bit adds.
"""

from __future__ import annotations

import numpy as np

_SIGNIFICANT_BITS = 26  # kept of each aligned term: float32's 24 and two more
_FP8_TERM_BITS = 13  # 8-bit floats: each term kept to 2**(the largest exponent - 13)
_FP8_SUM_BITS = 14  # and their sum to 14 significant bits


def _tf32(x: np.ndarray) -> np.ndarray:
    """A float32 read as tf32: its 10 high mantissa bits (the low 13 are not read)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


def _toward_zero_f32(exact: np.ndarray) -> np.ndarray:
    """float64 values truncated toward zero to float32."""
    nearest = exact.astype(np.float32)
    overshoot = np.abs(nearest.astype(np.float64)) > np.abs(exact)
    return np.where(overshoot, np.nextafter(nearest, np.float32(0)), nearest).astype(np.float32)


def _truncated(x: np.ndarray, quantum: np.ndarray) -> np.ndarray:
    """x truncated toward zero to a multiple of quantum."""
    return np.trunc(x / quantum) * quantum


def _all_finite(*arrays: np.ndarray) -> bool:
    return all(bool(np.isfinite(x).all()) for x in arrays)


def _products(a64: np.ndarray, b64: np.ndarray) -> np.ndarray:
    """The (K, M, N) products of a (M, K) and b (K, N), exact in float64.  K leads so that the
    reductions over it run along whole (M, N) planes."""
    return np.ascontiguousarray(a64.T)[:, :, None] * b64[:, None, :]


def _scaled_sum(products: np.ndarray, old: np.ndarray | None, scale: np.ndarray) -> np.ndarray:
    """The sum over K of the (K, M, N) products and `old`, each times `scale` (a power of two per
    (M, N)) truncated toward zero: integers below 2**35, so the float64 sum is exact in any order.
    The products are scaled in place."""
    products *= scale
    np.trunc(products, out=products)
    total = products.sum(axis=0)
    if old is not None:
        total += np.trunc(old * scale)
    return total


def mma_step(acc: np.ndarray, a: np.ndarray, b: np.ndarray, accumulate: bool,
             tf32: bool = False) -> np.ndarray:
    """One instruction: `acc (M, N) float32 (+)= a (M, K) @ b (K, N)` in the hardware's arithmetic."""
    if tf32:
        a, b = _tf32(a), _tf32(b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    old = acc.astype(np.float64) if accumulate else None
    if not _all_finite(a64, b64, *(() if old is None else (old,))):
        return _mma_step_nonfinite(a64, b64, old)
    # Finite inputs give finite terms far from float64's limits: each aligned term is an integer
    # number of quanta below 2**26, so the terms are scaled to integers, summed and scaled back.
    products = _products(a64, b64)
    largest = np.maximum(products.max(axis=0), -products.min(axis=0))
    if old is not None:
        np.maximum(largest, np.abs(old), out=largest)
    _, exponent = np.frexp(largest)  # largest = m * 2**exponent, m in [0.5, 1)
    quantum = np.ldexp(1.0, exponent - _SIGNIFICANT_BITS)
    total = _scaled_sum(products, old, np.ldexp(1.0, _SIGNIFICANT_BITS - exponent))
    return _toward_zero_f32(total * quantum)


def _mma_step_nonfinite(a64: np.ndarray, b64: np.ndarray, old: np.ndarray | None) -> np.ndarray:
    """`mma_step` where an input is infinite or NaN: the sums of rows with such a term are IEEE
    sums of the terms in order (their NaN's sign and payload follow from that order)."""
    products = a64[:, :, None] * b64[None, :, :]  # (M, K, N)
    terms = np.moveaxis(products, 1, -1)  # (M, N, K)
    if old is not None:
        terms = np.concatenate([terms, old[..., None]], axis=-1)
    finite = np.isfinite(terms).all(axis=-1)
    largest = np.abs(np.where(np.isfinite(terms), terms, 0)).max(axis=-1)
    _, exponent = np.frexp(largest)
    quantum = np.ldexp(1.0, exponent - _SIGNIFICANT_BITS)[..., None]
    with np.errstate(invalid="ignore", over="ignore"):
        aligned = _truncated(terms, quantum)
        total = np.where(finite, aligned.sum(axis=-1), terms.sum(axis=-1))
    return _toward_zero_f32(total)


def _exponent(x: np.ndarray) -> np.ndarray:
    """floor(log2 |x|) of each nonzero finite x (an int64 array); a large negative number for 0."""
    _, exponent = np.frexp(np.where(np.isfinite(x), x, 0))
    return np.where((x != 0) & np.isfinite(x), exponent.astype(np.int64) - 1, np.int64(-4096))


def fp8_step(acc: np.ndarray, a: np.ndarray, b: np.ndarray, accumulate: bool) -> np.ndarray:
    """One instruction on 8-bit float inputs: `acc (M, N) float32 (+)= a (M, K) @ b (K, N)` in the
    hardware's arithmetic (the module docstring's fp8 model)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    old = acc.astype(np.float64) if accumulate else np.zeros(acc.shape)
    if not _all_finite(a64, b64, old):
        return _fp8_step_nonfinite(a64, b64, old)
    # As in `mma_step`, every truncated term is an integer number of quanta (below 2**15).
    # A zero operand's exponent (-4096) keeps its product's sum below -2048 whatever the other
    # operand's, where the zero products of the model count as -4096: the maximum is the same.
    exponents = _exponent(a64).astype(np.int32).T[:, :, None] + _exponent(b64).astype(np.int32)[:, None, :]
    largest = np.maximum(exponents.max(axis=0), _exponent(old))
    largest = np.where(largest < -2048, 0, largest)  # every term zero: any scale
    total = _scaled_sum(_products(a64, b64), old, np.ldexp(1.0, _FP8_TERM_BITS - largest))
    total *= np.ldexp(1.0, largest - _FP8_TERM_BITS)
    _, top = np.frexp(total)
    return _truncated(total, np.ldexp(1.0, top - _FP8_SUM_BITS)).astype(np.float32)


def _fp8_step_nonfinite(a64: np.ndarray, b64: np.ndarray, old: np.ndarray) -> np.ndarray:
    """`fp8_step` where an input is infinite or NaN (see `_mma_step_nonfinite`)."""
    products = np.moveaxis(a64[:, :, None] * b64[None, :, :], 1, -1)  # (M, N, K), exact
    exponents = _exponent(a64)[:, None, :] + _exponent(b64).T[None, :, :]
    largest = np.where(products != 0, exponents, np.int64(-4096)).max(axis=-1)
    largest = np.maximum(largest, _exponent(old))
    largest = np.where(largest < -2048, 0, largest)
    quantum = np.ldexp(1.0, largest - _FP8_TERM_BITS)
    with np.errstate(invalid="ignore", over="ignore"):
        total = _truncated(products, quantum[..., None]).sum(axis=-1) + _truncated(old, quantum)
        _, top = np.frexp(np.where(np.isfinite(total), total, 0))
        total = _truncated(total, np.ldexp(1.0, top - _FP8_SUM_BITS))
        finite = np.isfinite(products).all(axis=-1) & np.isfinite(old)
        total = np.where(finite, total, products.sum(axis=-1) + old)  # NaN and inf as IEEE sums give them
    return total.astype(np.float32)


def integer_step(acc: np.ndarray, a: np.ndarray, b: np.ndarray, accumulate: bool) -> np.ndarray:
    """One integer instruction: `acc (M, N) int32 (+)= a @ b`, wrapping to 32 bits."""
    total = a.astype(np.int64) @ b.astype(np.int64)
    if accumulate:
        total = total + acc.astype(np.int64)
    return (total & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
