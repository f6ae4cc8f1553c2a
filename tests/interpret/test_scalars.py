"""Runtime scalars in the interpreter: offsets, counts and grids from runtime ints (checked
against numpy, one compile for many values), float32 scalar arithmetic (of float arguments, and of
indices promoted as Python promotes ints) bit-exact against numpy's float32, and the same
argument checks as a GPU launch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scalar_kernels import B, copy_loop, copy_tiles, expected_copy
from support import random_bits

import asyncdsl as ad


def test_offsets_counts_and_grids_from_runtime_ints(compilations):
    x = random_bits((200, 32), ad.float32, 1)
    for row0, count in [(0, 4), (32, 2), (48, 9), (160, 3), (0, 0)]:
        y = np.zeros_like(x)
        copy_tiles.interpret(x, y, row0, count)
        assert y.tobytes() == expected_copy(x, row0, count).tobytes(), (row0, count)
    # Every row0 is a multiple of 16; of the counts, 0 is one too: two specializations.
    assert compilations[0] == 2


def test_an_int_that_is_no_multiple_of_16_compiles_one_more_kernel(compilations):
    x = random_bits((128, 32), ad.float32, 2)
    for row0, count, step in [(8, 3, 16), (3, 2, 40), (5, 4, 17), (32, 2, 16), (0, 1, 100)]:
        y = np.zeros_like(x)
        copy_loop.interpret(x, y, row0, count, step)
        assert y.tobytes() == expected_copy(x, row0, count, step).tobytes(), (row0, count, step)
    # Specializations by (row0, count, step) % 16 == 0: (F,F,T), (F,F,F), (T,F,T), (T,F,F).
    assert compilations[0] == 4


def test_scalars_by_name_numpy_scalars_and_the_interpret_knob(monkeypatch):
    x = random_bits((64, 32), ad.float32, 3)
    y = np.zeros_like(x)
    copy_loop.interpret(x, y, step=np.int16(16), count=np.uint8(2), row0=np.int64(16))
    assert y.tobytes() == expected_copy(x, 16, 2).tobytes()
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")
    y = np.zeros_like(x)
    copy_tiles(x, y, 32, 2)
    assert y.tobytes() == expected_copy(x, 32, 2).tobytes()


def test_runtime_ints_are_checked_like_a_gpu_launch():
    x = np.zeros((64, 32), np.float32)
    with pytest.raises(ad.ArgumentError,
                       match="argument 'row0' is 2147483648, outside the kernel's 32-bit int"):
        copy_loop.interpret(x, x.copy(), 2**31, 1, 16)
    with pytest.raises(ad.ArgumentError,
                       match="argument 'count' of the kernel is a runtime int, but got float 2.0"):
        copy_loop.interpret(x, x.copy(), 0, 2.0, 16)


# -- float32 scalars -------------------------------------------------------------------------------


@ad.kernel(grid=lambda x, y: (x.shape[0] // B,))
def copy_upper_half(x, y):
    """CTA i copies its B rows when i / (CTAs / 2 + 1) >= 0.8 or i * 0.1 == 0.3, in float32: there
    3 * 0.1 rounds to 0.3 (in Python's float64 it does not).  The divisor is no power of two (by
    which a division would be a product)."""
    i = ad.program_id(0)
    buf = ad.smem((B, x.shape[1]), x.dtype)
    bar = ad.barrier()
    with ad.when((i / (x.shape[0] // B // 2 + 1) >= 0.8) | (i * 0.1 == 0.3)):
        rows = ad.ds(i * B, B)
        ad.async_copy(x.at[rows, :], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[rows, :])
        ad.await_async_copy(0)


def test_indices_promote_to_float32_as_python_promotes_to_float(ptxas):
    x = random_bits((8 * B, 32), ad.float32, 5)
    y = np.zeros_like(x)
    copy_upper_half.interpret(x, y)
    f = np.float32
    copied = [i for i in range(8) if f(i) / f(5) >= f(0.8) or f(i) * f(0.1) == f(0.3)]
    assert copied == [3, 4, 5, 6, 7]
    want = np.zeros_like(x)
    for i in copied:
        want[i * B:(i + 1) * B] = x[i * B:(i + 1) * B]
    assert y.tobytes() == want.tobytes()
    ptx = copy_upper_half.ptx(x, y)
    for instruction in ("cvt.rn.f32.s32", "div.rn.f32", "mul.rn.f32", "setp.ge.f32", "setp.eq.f32"):
        assert instruction in ptx, instruction
    ptxas(ptx)


@ad.kernel(grid=(1,))
def copy_if_equal(x, y, s: float, t: float, n: int, EXPECTED: ad.constexpr):
    """Copy x to y when ((s * t + n) / (s - t) - -t) * 0.1 computes to EXPECTED (NaN: when it is
    NaN)."""
    r = ((s * t + n) / (s - t) - -t) * 0.1
    holds = (r != r) if EXPECTED != EXPECTED else (r == EXPECTED)
    buf = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    with ad.when(holds):
        ad.async_copy(x, buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y)
        ad.await_async_copy(0)


def numpy_float32(s, t, n):
    f = np.float32
    with np.errstate(all="ignore"):
        return float(((f(s) * f(t) + f(n)) / (f(s) - f(t)) - -f(t)) * f(0.1))


@pytest.mark.parametrize(
    "s, t, n",
    [(0.3, 0.7, 3), (1e-3, 3.1, -7), (2.5, 2.5, 1), (2.5, 2.5, 0), (1e30, -1e30, 5), (1.1, 1.0, 16777217),
     (float("inf"), 1.0, 0), (1e-40, 3e-39, 0), (np.float64(0.1), np.float16(0.2), np.int8(-3))],
)
def test_float_scalar_arithmetic_is_float32_bit_exact(s, t, n):
    expected = numpy_float32(s, t, n)
    x = random_bits((16,), ad.float32, 4)
    y = np.zeros_like(x)
    copy_if_equal.interpret(x, y, s, t, n, EXPECTED=expected)
    assert y.tobytes() == x.tobytes(), expected
    if math.isfinite(expected):  # the same kernel told a neighbouring value is not equal
        y = np.zeros_like(x)
        copy_if_equal.interpret(x, y, s, t, n,
                                EXPECTED=float(np.nextafter(np.float32(expected), np.float32(np.inf))))
        assert not y.any()


def test_floats_beyond_float32_are_refused_and_python_floats_rounded():
    x = np.zeros(16, np.float32)
    with pytest.raises(ad.ArgumentError, match=r"argument 's' is 3.5e\+38, beyond the float32 range"):
        copy_if_equal.interpret(x, x.copy(), 3.5e38, 1.0, 0, EXPECTED=0.0)
    # 0.1 + 2**-30 rounds to float32's 0.1, whose arithmetic the kernel does.
    expected = numpy_float32(0.1, 0.2, 1)
    y = np.zeros_like(x)
    x[:] = 1
    copy_if_equal.interpret(x, y, 0.1 + 2**-30, 0.2, 1, EXPECTED=expected)
    assert y.all()
