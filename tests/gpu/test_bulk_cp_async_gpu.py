"""Contiguous bulk copies and the cp.async fallback on the H200, bit-exact against numpy and
identical to the interpreter on the same inputs: bulk rows longer than a TMA box, the clamped
out-of-bounds tail of loads (SMEM past the clamp keeps what it held, the barrier still
completes, arriving or not) and of stores, promise_in_bounds; cp.async windows moved in 16-,
8- and 4-byte chunks, completing on a barrier or in commit groups; swizzled (32/64/128, tiled
and not) cp.async, byte for byte equal to a TMA load of the same slice on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
from bulk_cp_async_kernels import (
    CP_ASYNC_WINDOWS,
    SWIZZLED_CASES,
    bulk_clamped_load,
    bulk_clamped_store,
    bulk_rows,
    bulk_tiled_rows,
    cp_async_window,
    expected_clamped_load,
    expected_clamped_store,
    expected_swizzled_rows,
    swizzled_rows,
)
from gpu_support import hopper_or_skip
from support import poisoned, random_bits, raw

import asyncdsl as ad
from asyncdsl.hw.transforms import apply_chain_array
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(23)
F32, BF16 = ad.float32, ad.bfloat16
X_LEN, Y_LEN = 1000, 256


def on_gpu_and_interpreted(kernel, inputs, outputs, **constexprs) -> tuple[list, list]:
    """The outputs of `kernel` run on the GPU and in the interpreter, from the same arrays."""
    device = [to_device(a) for a in (*inputs, *outputs)]
    kernel(*device, **constexprs)
    gpu = [to_host(d) for d in device[len(inputs):]]
    interpreted = [o.copy() for o in outputs]
    kernel.interpret(*[i.copy() for i in inputs], *interpreted, **constexprs)
    return gpu, interpreted


@pytest.mark.parametrize("oob", ["undefined", "promise_in_bounds"])
@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int8, ad.float64, ad.float8_e4m3fn])
def test_bulk_rows(dtype, oob):
    x = random_bits((64, 4096 // dtype.itemsize), dtype, RNG)  # 4096-byte rows: no TMA box holds one
    (gpu,), (interpreted,) = on_gpu_and_interpreted(
        bulk_rows, [x], [poisoned(x.shape, dtype)], ROWS=4, OOB=oob
    )
    assert raw(gpu) == raw(x) == raw(interpreted)


@pytest.mark.parametrize("arrive", [True, False])
@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize("start", [0, 744, 800, 996, 1000, 2048, -64])
def test_bulk_clamped_load_tail(start, traced, arrive):
    x, fill = random_bits((X_LEN,), F32, RNG), random_bits((Y_LEN,), F32, RNG)
    (gpu,), (interpreted,) = on_gpu_and_interpreted(
        bulk_clamped_load, [x, fill], [poisoned((Y_LEN,), F32)], START=start, TRACED=traced, ARRIVE=arrive
    )
    expected = raw(expected_clamped_load(x, fill, start))
    assert raw(gpu) == expected
    assert raw(interpreted) == expected


@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize("start", [0, 8, 500, 996, 1000, 4096])
def test_bulk_clamped_store_tail(start, traced):
    x, y = random_bits((Y_LEN,), F32, RNG), random_bits((X_LEN,), F32, RNG)
    (gpu,), (interpreted,) = on_gpu_and_interpreted(bulk_clamped_store, [x], [y], START=start, TRACED=traced)
    expected = raw(expected_clamped_store(x, y, start))
    assert raw(gpu) == expected
    assert raw(interpreted) == expected


def test_bulk_tiled_whole_rows():
    x = random_bits((64, 32), BF16, RNG)
    (gpu,), (interpreted,) = on_gpu_and_interpreted(
        bulk_tiled_rows, [x], [poisoned((4, 2, 1, 8, 32), BF16)], ROWS=16, TILE=8
    )
    tile = (ad.TileTransform((8, 32)),)
    expected = raw(np.stack([apply_chain_array(tile, x[i * 16 : (i + 1) * 16]) for i in range(4)]))
    assert raw(gpu) == expected == raw(interpreted)


@pytest.mark.parametrize("barrier", [True, False])
@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize(
    "x_shape, y_shape, col, chunk", CP_ASYNC_WINDOWS,
    ids=[f"chunk{c[3]}-width{c[1][2]}" for c in CP_ASYNC_WINDOWS]
)
def test_cp_async_windows(x_shape, y_shape, col, chunk, traced, barrier):
    x = random_bits(x_shape, F32, RNG)
    (gpu,), (interpreted,) = on_gpu_and_interpreted(
        cp_async_window, [x], [poisoned(y_shape, F32)], COL=col, TRACED=traced, BARRIER=barrier
    )
    rows, cols = y_shape[1:]
    expected = raw(np.stack([x[i * rows : (i + 1) * rows, col : col + cols] for i in range(y_shape[0])]))
    assert raw(gpu) == expected
    assert raw(interpreted) == expected


@pytest.mark.parametrize("barrier", [True, False])
@pytest.mark.parametrize(
    "swizzle, tiled, x_shape, y_shape", SWIZZLED_CASES,
    ids=[f"swizzle{s}-{'tiled' if t else 'rows'}" for s, t, _, _ in SWIZZLED_CASES],
)
def test_cp_async_swizzled_equals_tma(swizzle, tiled, x_shape, y_shape, barrier):
    x = random_bits(x_shape, BF16, RNG)
    constexprs = dict(SWIZZLE=swizzle, TILED=tiled, BARRIER=barrier)
    (gpu,), (interpreted,) = on_gpu_and_interpreted(
        swizzled_rows, [x], [poisoned(y_shape, BF16)], ENGINE="cp_async", **constexprs
    )
    (by_tma,), _ = on_gpu_and_interpreted(
        swizzled_rows, [x], [poisoned(y_shape, BF16)], ENGINE="tma", **constexprs
    )
    expected = expected_swizzled_rows(x, y_shape, swizzle, tiled).tobytes()
    assert raw(gpu) == expected
    assert raw(gpu) == raw(by_tma)
    assert raw(interpreted) == expected
