"""The interpreter's documented wgmma numerics (docs/register-tiles.md, "wgmma"), written from
the text: each instruction of K products (16 for 16-bit inputs, 8 for tf32, 32 for 8-bit ones)
per output element, in order along K.

- 16-bit and tf32 inputs: the exact products and the old accumulator (unless the first
  instruction does not accumulate) aligned to the exponent of the largest, each truncated toward
  zero to 26 significant bits at that scale, added exactly, the sum truncated toward zero to
  float32; tf32 reads a float32's 10 high mantissa bits.
- 8-bit floats: the terms truncated toward zero to 2**(e - 13), e the largest exponent among
  them (a product's exponent being the sum of its operands'), the sum truncated toward zero to
  14 significant bits.
- 8-bit integers: the exact sum wrapped to 32 bits.
A NaN or an infinity among the terms gives what the IEEE sum of the terms gives.
"""

from __future__ import annotations

import numpy as np

INSTRUCTION_K = {
    "bfloat16": 16,
    "float16": 16,
    "float32": 8,
    "float8_e4m3fn": 32,
    "float8_e5m2": 32,
    "int8": 32,
    "uint8": 32,
}
FLOAT32_LARGEST = float(np.finfo(np.float32).max)


def _floor_log2(x: np.ndarray) -> np.ndarray:
    """floor(log2 |x|) of finite nonzero values (exact: from frexp)."""
    _, exponent = np.frexp(np.where(np.isfinite(x) & (x != 0), x, 1.0))
    return exponent.astype(np.int64) - 1


def _toward_zero(x: np.ndarray, quantum: np.ndarray) -> np.ndarray:
    return np.trunc(x / quantum) * quantum


def _truncate_to_float32(x: np.ndarray) -> np.ndarray:
    """float64 values truncated toward zero to float32 (24 significant bits, subnormals at
    2**-149, beyond the largest finite value: the largest)."""
    scale = np.ldexp(1.0, np.maximum(_floor_log2(x) - 23, -149))
    with np.errstate(invalid="ignore", over="ignore"):
        cut = np.where(np.isfinite(x) & (x != 0), _toward_zero(x, scale), x)
        cut = np.where(np.isfinite(x), np.clip(cut, -FLOAT32_LARGEST, FLOAT32_LARGEST), cut)
    return cut.astype(np.float32)


def _tf32(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


def _float_step(acc: np.ndarray, a: np.ndarray, b: np.ndarray, accumulate: bool) -> np.ndarray:
    terms = a.astype(np.float64)[:, None, :] * b.astype(np.float64).T[None, :, :]  # (M, N, K)
    if accumulate:
        terms = np.concatenate([terms, acc.astype(np.float64)[..., None]], axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(terms).all(axis=-1)
        largest = np.where(np.isfinite(terms), np.abs(terms), 0).max(axis=-1)
        quantum = np.ldexp(1.0, _floor_log2(largest) + 1 - 26)[..., None]  # 26 bits below 2**(e+1)
        total = np.where(finite, _toward_zero(terms, quantum).sum(axis=-1), terms.sum(axis=-1))
    return _truncate_to_float32(total)


def _fp8_step(acc: np.ndarray, a: np.ndarray, b: np.ndarray, accumulate: bool) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    products = a64[:, None, :] * b64.T[None, :, :]
    exponents = _floor_log2(a64)[:, None, :] + _floor_log2(b64).T[None, :, :]
    old = acc.astype(np.float64) if accumulate else np.zeros(acc.shape)
    nothing = np.int64(-(1 << 20))
    largest = np.where(products != 0, exponents, nothing).max(axis=-1)
    largest = np.maximum(largest, np.where(old != 0, _floor_log2(old), nothing))
    largest = np.where(largest == nothing, 0, largest)
    quantum = np.ldexp(1.0, largest - 13)
    with np.errstate(invalid="ignore", over="ignore"):
        total = _toward_zero(products, quantum[..., None]).sum(axis=-1) + _toward_zero(old, quantum)
        nonzero = np.isfinite(total) & (total != 0)
        total = np.where(nonzero, _toward_zero(total, np.ldexp(1.0, _floor_log2(total) + 1 - 14)), total)
        finite = np.isfinite(products).all(axis=-1) & np.isfinite(old)
        total = np.where(finite, total, products.sum(axis=-1) + old)
    return total.astype(np.float32)


def _int_step(acc: np.ndarray, a: np.ndarray, b: np.ndarray, accumulate: bool) -> np.ndarray:
    total = a.astype(np.int64) @ b.astype(np.int64) + (acc.astype(np.int64) if accumulate else 0)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


def mma(acc: np.ndarray, a: np.ndarray, b: np.ndarray, dtype: str, accumulate: bool) -> np.ndarray:
    """`acc (+)= a (M, K) @ b (K, N)` as the instructions along K compute it, in order."""
    step = (
        _int_step if dtype in ("int8", "uint8") else _fp8_step if dtype.startswith("float8") else _float_step
    )
    if dtype == "float32":
        a, b = _tf32(a), _tf32(b)
    k = INSTRUCTION_K[dtype]
    for start in range(0, a.shape[1], k):
        acc = step(acc, a[:, start : start + k], b[start : start + k], accumulate or start > 0)
    return acc
