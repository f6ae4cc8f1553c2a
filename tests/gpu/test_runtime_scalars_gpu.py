"""Runtime int and float arguments on the H200: one compile serves many values (the warm path
refills the scalars and re-encodes no descriptor), results equal numpy's and the interpreter's
byte for byte, float32 scalar arithmetic is bit-exact, and a value that does not fit is refused
on the warm path too.

Run:  python -m pytest tests/gpu/test_runtime_scalars_gpu.py -v -rA
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gpu_support import hopper_or_skip
from scalar_kernels import B, copy_tiles, expected_copy, scale_tile
from support import random_bits

import asyncdsl as ad
from asyncdsl import runtime
from asyncdsl.runtime import clear_loaded_kernels, load_kernel, to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

def test_many_offsets_and_counts_one_compile_no_new_descriptors(compilations):
    x = random_bits((200, 64), ad.float32, 11)
    src, dst = to_device(x), to_device(np.zeros_like(x))
    copied = np.zeros(x.shape[0], bool)
    for row0, count in [(0, 3), (32, 2), (48, 9), (160, 3), (16, 1), (96, 7)]:  # no count a multiple of 16
        copy_tiles(src, dst, row0, count)  # the same arrays every time: only the scalars change
        copied[row0:row0 + count * B] = True
        assert to_host(dst).tobytes() == np.where(copied[:, None], x, 0).tobytes(), (row0, count)
    assert compilations[0] == 1
    loaded = load_kernel(copy_tiles.compile(src, dst, 0, 3).binary)
    assert [cache.encode_count for cache in loaded.tensor_maps] == [1, 1]  # encoded once, for the first call


def test_the_gpu_and_the_interpreter_agree_for_each_value():
    x = random_bits((128, 32), ad.float32, 12)
    for row0, count in [(0, 8), (32, 3), (112, 1), (8, 2), (40, 5)]:
        interpreted = np.zeros_like(x)
        copy_tiles.interpret(x, interpreted, row0, count)
        dst = to_device(np.zeros_like(x))
        copy_tiles(to_device(x), dst, row0, count)
        assert to_host(dst).tobytes() == interpreted.tobytes() == expected_copy(x, row0, count).tobytes()


@ad.kernel(grid=(1,))
def copy_if_equal(x, y, s: float, t: float, n: int, expected: float):
    """Copy x to y when ((s * t + n) / (s - t) - -t) * 0.1 computes to `expected` (or both are NaN)."""
    r = ((s * t + n) / (s - t) - -t) * 0.1
    buf = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    with ad.when((r == expected) | ((r != r) & (expected != expected))):
        ad.async_copy(x, buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y)
        ad.await_async_copy(0)


def numpy_float32(s, t, n):
    f = np.float32
    with np.errstate(all="ignore"):
        return float(((f(s) * f(t) + f(n)) / (f(s) - f(t)) - -f(t)) * f(0.1))


def test_float_scalar_arithmetic_is_float32_on_the_gpu(compilations):
    x = random_bits((16,), ad.float32, 13)
    src = to_device(x)

    def copies(s, t, n, expected) -> bool:
        dst = to_device(np.zeros_like(x))
        copy_if_equal(src, dst, s, t, n, expected)
        out = to_host(dst)
        assert out.tobytes() in (x.tobytes(), np.zeros_like(x).tobytes())
        return out.tobytes() == x.tobytes()

    cases = [(0.3, 0.7, 3), (1e-3, 3.1, -7), (2.5, 2.5, 1), (1e30, -1e30, 5), (1.1, 1.0, 16777217),
             (float("inf"), 1.0, 0), (1e-40, 3e-39, 0)]  # the last keeps subnormals (no flush to zero)
    for s, t, n in cases:
        expected = numpy_float32(s, t, n)
        assert copies(s, t, n, expected), (s, t, n, expected)
        if math.isfinite(expected):
            neighbour = float(np.nextafter(np.float32(expected), np.float32(np.inf)))
            assert not copies(s, t, n, neighbour), (s, t, n, neighbour)
    assert compilations[0] == 2  # n = 0 is a multiple of 16, the others are not


def test_a_runtime_float_scales_register_tiles(compilations):
    x = np.random.default_rng(14).standard_normal((64, 64)).astype(np.float32)
    src = to_device(x)
    built = []
    for scale, shift in [(0.5, 3), (-1.25, -7), (0.0, 1), (3.0e-3, 5)]:
        dst = to_device(np.zeros_like(x))
        scale_tile(src, dst, scale, shift)
        built.append(compilations[0])
        f = np.float32
        want = np.where(x > f(scale), x * f(scale) + f(shift), -f(scale) / f(2.0)).astype(np.float32)
        assert to_host(dst).tobytes() == want.tobytes(), (scale, shift)
    # One compile at most (none where another test of this process compiled scale_tile already),
    # and none for the values after the first.
    assert built[0] <= 1 and built == built[:1] * 4


def test_a_value_that_does_not_fit_is_refused_on_the_warm_path_too():
    x = random_bits((64, 32), ad.float32, 15)
    src, dst = to_device(x), to_device(np.zeros_like(x))
    copy_tiles(src, dst, 0, 1)
    with pytest.raises(ad.ArgumentError,
                       match="argument 'row0' is 2147483648, outside the kernel's 32-bit int"):
        copy_tiles(src, dst, 2**31, 1)  # same specialization class as row0 = 0: the warm path
    copy_tiles(src, dst, 16, 1)
    assert to_host(dst)[:32].tobytes() == x[:32].tobytes()


def test_other_values_after_a_restart_load_the_cubin_from_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path))
    clear_loaded_kernels()  # earlier tests in this process may have loaded the same cubin
    x = random_bits((64, 32), ad.float32, 16)
    src, dst = to_device(x), to_device(np.zeros_like(x))
    copy_tiles(src, dst, 0, 1)
    binary = copy_tiles.compile(src, dst, 0, 1).binary
    assert runtime.load_kernel(binary).cubin_source == "compiled"
    clear_loaded_kernels()  # a fresh process would start here
    copy_tiles(src, dst, 32, 2)
    assert load_kernel(copy_tiles.compile(src, dst, 32, 2).binary).cubin_source == "disk"
    expected = expected_copy(x, 32, 2)
    expected[:B] = x[:B]  # the first call's rows; rows 16-31 were never copied
    assert to_host(dst).tobytes() == expected.tobytes()


@ad.kernel(grid=(1,), block=128)
def int_division(y, a: int, b: int):
    """a // b, a % b (runtime divisor), and a // -1, a % -1, a // 7, a // 8, a % 8, a % 7,
    a // (2^31 - 1) (constant ones) into the rows of y."""
    row = ad.zeros((1, 128), ad.int32)
    constants = (a // -1, a % -1, a // 7, a // 8, a % 8, a % 7, a // (2**31 - 1))
    for index, value in enumerate((a // b, a % b, *constants)):
        ad.store(y.at[ad.ds(index, 1), :], row + value)


def wrapped(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


@pytest.mark.parametrize("a, b", [(-2**31, -1), (-2**31, 1), (-2**31, 7), (2**31 - 1, -1), (-7, 2), (7, -2),
                                  (-2**31, -2**31), (-2**31, 2**31 - 1), (-1, 2**31 - 1), (0, -3)])
def test_int_division_floors_and_wraps_at_the_int32_ends_as_the_interpreter_says(a, b):
    """Python's floor division and modulo, wrapped to int32 where the quotient overflows
    (-2^31 // -1): the same on the GPU and in the interpreter, divisor runtime or constant."""
    expected = np.array(
        [[wrapped(v)] * 128 for v in (a // b, a % b, a // -1, a % -1, a // 7, a // 8, a % 8, a % 7,
                                      a // (2**31 - 1))], np.int32)
    interpreted = np.zeros_like(expected)
    int_division.interpret(interpreted, a, b)
    y = to_device(np.full_like(expected, 12345))
    int_division(y, a, b)
    assert interpreted.tolist() == expected.tolist()
    assert to_host(y).tolist() == expected.tolist()
