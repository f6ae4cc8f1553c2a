"""Traced scalars in the interpreter: float32 arithmetic made from indices (Python's `/` and
promotion rules), bit-exact against numpy's float32."""

from __future__ import annotations

import numpy as np
from support import random_bits

import asyncdsl as ad

B = 16


@ad.kernel(grid=lambda x, y: (x.shape[0] // B,))
def copy_upper_half(x, y):
    """CTA i copies its B rows when i / (CTAs / 2) >= 1.0 or i * 0.1 == 0.3, in float32: there
    3 * 0.1 rounds to 0.3 (in Python's float64 it does not)."""
    i = ad.program_id(0)
    buf = ad.smem((B, x.shape[1]), x.dtype)
    bar = ad.barrier()
    with ad.when((i / (x.shape[0] // B // 2) >= 1.0) | (i * 0.1 == 0.3)):
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
    copied = [i for i in range(8) if f(i) / f(4) >= 1.0 or f(i) * f(0.1) == f(0.3)]
    assert copied == [3, 4, 5, 6, 7]
    want = np.zeros_like(x)
    for i in copied:
        want[i * B:(i + 1) * B] = x[i * B:(i + 1) * B]
    assert y.tobytes() == want.tobytes()
    ptx = copy_upper_half.ptx(x, y)
    for instruction in ("cvt.rn.f32.s32", "div.rn.f32", "mul.rn.f32", "setp.ge.f32", "setp.eq.f32"):
        assert instruction in ptx, instruction
    ptxas(ptx)
