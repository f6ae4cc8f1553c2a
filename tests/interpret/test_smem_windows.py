"""Windows of shared-memory buffers in the interpreter, against numpy: TMA loads and stores into
windows at static and traced starts (a cluster's multicast load among them), register loads and
stores (`ldmatrix`/`stmatrix` among them) through windows, and wgmma operands that are windows;
and the windows refused, at the line that takes them: not contiguous, not whole tiles of the
layout, off a swizzle atom, off the 128 bytes TMA needs (16 for a bulk copy)."""

from __future__ import annotations

import numpy as np
import pytest
from smem_window_kernels import (
    REGISTER_LAYOUTS,
    SWIZZLES,
    columns_through_windows,
    multicast_into_a_window,
    registers_through_windows,
    tiling,
    tma_through_halves,
    tma_traced_window,
    wgmma_on_column_windows,
    wgmma_on_windows,
)
from support import expect, random_bits

import asyncdsl as ad
from asyncdsl.errors import CopyError, InterpretError, OutOfBoundsError, TraceError

LAYOUTS = (None, *SWIZZLES)  # None: a plain row-major buffer


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16, ad.int8), ids=str)
@pytest.mark.parametrize("swizzle", LAYOUTS)
@pytest.mark.parametrize("half", (32, 64))
def test_tma_loads_and_stores_through_static_windows(dtype, swizzle, half):
    x = random_bits((128, 128 // dtype.itemsize), dtype, 1)  # rows of one 128-byte swizzle span
    y = np.zeros_like(x)
    tma_through_halves.interpret(x, y, SWIZZLE=swizzle, HALF=half)
    expected = np.concatenate([x[row:row + half] for row in range(128 - half, -1, -half)])
    assert y.tobytes() == expected.tobytes()


@pytest.mark.parametrize("swizzle", LAYOUTS)
def test_tma_through_a_window_at_a_traced_start(swizzle):
    x = random_bits((128, 64), ad.bfloat16, 2)
    y = np.zeros_like(x)
    tma_traced_window.interpret(x, y, SWIZZLE=swizzle)
    assert y.tobytes() == x.tobytes()


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16), ids=str)
@pytest.mark.parametrize("swizzle", LAYOUTS)
@pytest.mark.parametrize("layout", REGISTER_LAYOUTS)
def test_register_loads_and_stores_through_windows(dtype, swizzle, layout):
    x = np.random.default_rng(3).integers(-8, 8, (128, 64)).astype(dtype.numpy)
    y = np.zeros_like(x)
    registers_through_windows.interpret(x, y, SWIZZLE=swizzle, LAYOUT=layout)
    t = x.astype(np.float64)
    t = t * t - t  # small integers: exact in either dtype
    assert np.array_equal(y, np.concatenate([t[64:], t[:64]]).astype(dtype.numpy))


@pytest.mark.parametrize("n", (64, 128))
def test_wgmma_operands_that_are_windows(n):
    rng = np.random.default_rng(4)
    a = rng.integers(-4, 4, (128, 64)).astype(ad.bfloat16.numpy)
    b = rng.integers(-4, 4, (128, n)).astype(ad.bfloat16.numpy)
    c = np.zeros((128, n), np.float32)
    wgmma_on_windows.interpret(a, b, c, N=n)
    assert np.array_equal(c, a.astype(np.float64) @ b[64:].astype(np.float64))


@pytest.mark.parametrize("swizzle", LAYOUTS)
def test_a_multicast_load_into_a_window(swizzle):
    x = random_bits((64, 64), ad.bfloat16, 8)
    y = np.zeros((128, 64), x.dtype)
    multicast_into_a_window.interpret(x, y, SWIZZLE=swizzle)
    assert y.tobytes() == np.concatenate([x, x]).tobytes()


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16), ids=str)
@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_windows_of_whole_column_tiles(dtype, swizzle):
    span = (swizzle or 64) // dtype.itemsize
    x = np.random.default_rng(5).integers(-8, 8, (64, 3 * span)).astype(dtype.numpy)
    y = np.zeros((2, *x.shape), x.dtype)
    columns_through_windows.interpret(x, y, SWIZZLE=swizzle)
    t = x.astype(np.float64)
    t = (t * t - t).astype(dtype.numpy)  # small integers: exact in either dtype
    spans = np.split(t, 3, axis=1)
    for p in (0, 1):
        assert np.array_equal(y[p], np.concatenate(spans[p:] + spans[:p], axis=1))


def test_column_windows_are_wgmma_operands():
    a = np.random.default_rng(6).integers(-4, 4, (64, 128)).astype(ad.bfloat16.numpy)
    c = np.zeros((64, 64), np.float32)
    wgmma_on_column_windows.interpret(a, c)
    assert np.array_equal(c, a[:, :64].astype(np.float64) @ a[:, 64:].astype(np.float64).T)


@ad.kernel(grid=(1,))
def take_columns(x, START: ad.constexpr, COLUMNS: ad.constexpr, TILE_ROWS: ad.constexpr):
    buf = ad.smem((64, 128), x.dtype, transforms=ad.TileTransform((TILE_ROWS, 64)), swizzle=128)
    view = buf.at[:, ad.ds(START, COLUMNS)]  # the view
    view[...] = ad.zeros(view.shape, x.dtype)


@pytest.mark.parametrize("start, columns, tile_rows, fragments", [
    (0, 32, 64, ("blocks of 64 index(es) of dim 1",)),  # part of a column tile
    (32, 64, 64, ("multiple of 64 columns", "not at column 32")),  # across two
    (0, 64, 8, ("blocks of 128 index(es) of dim 1",)),  # tiles of 8 rows: a column's tiles are apart
])
def test_column_windows_a_layout_cannot_express_are_refused(start, columns, tile_rows, fragments):
    expect(TraceError, take_columns, (SPEC,), dict(START=start, COLUMNS=columns, TILE_ROWS=tile_rows),
           *fragments, line_text="the view")


# -- refusals ------------------------------------------------------------------------------------

KEYS = {  # by name: a constexpr is hashable, a slice is not
    "columns": (0, slice(None), slice(0, 32)),
    "window before an index": (slice(None), ad.ds(0, 64)),
    "index after a whole dim": (slice(None), 3),
    "every dim indexed": (0, 1, 2),
    "past the end": (0, ad.ds(100, 64)),
    "part of a tile": (0, ad.ds(0, 4)),
    "inside tiles": (0, ad.ds(4, 8)),
    "across tiles": (1, slice(8, 20)),
}


@ad.kernel(grid=(1,))
def take_window(x, KEY: ad.constexpr, SWIZZLE: ad.constexpr):
    buf = ad.smem((2, 128, 64), x.dtype, transforms=tiling(x.dtype, SWIZZLE or 0), swizzle=SWIZZLE) \
        if SWIZZLE is not None else ad.smem((2, 128, 64), x.dtype)
    view = buf.at[KEYS[KEY]]  # the view
    view[...] = ad.zeros(view.shape, x.dtype)


SPEC = ad.ArraySpec((128, 64), ad.bfloat16)


@pytest.mark.parametrize("key, fragments", [
    ("columns", ("must stay contiguous", "dim 2")),
    ("window before an index", ("must stay contiguous", "dim 1")),
    ("index after a whole dim", ("must stay contiguous",)),
    ("every dim indexed", ("keeps at least one dim",)),
    ("past the end", ("outside the dim's 128 rows",)),
])
def test_windows_that_are_not_contiguous_are_refused(key, fragments):
    expect(TraceError, take_window, (SPEC,), dict(KEY=key, SWIZZLE=None), *fragments,
           line_text="the view")


@pytest.mark.parametrize("key, swizzle, fragments", [
    # Not whole tiles of the (8, 64) tiling.
    ("part of a tile", 128, ("blocks of 8 row(s)", "a window is whole blocks")),
    ("inside tiles", 128, ("multiple of 8 rows", "not at row 4")),
    ("across tiles", 0, ("blocks of 8 row(s)",)),
])
def test_windows_a_layout_cannot_express_are_refused(key, swizzle, fragments):
    expect(TraceError, take_window, (SPEC,), dict(KEY=key, SWIZZLE=swizzle), *fragments,
           line_text="the view")


@ad.kernel(grid=(1,))
def swizzled_rows(x, START: ad.constexpr, ROWS: ad.constexpr):
    buf = ad.smem((128, 64), x.dtype, swizzle=128)  # row-major rows of 128 bytes, swizzled
    view = buf.at[ad.ds(START, ROWS)]  # the view
    view[...] = ad.zeros(view.shape, x.dtype)


def test_a_window_off_a_swizzle_atom_is_refused():
    # Any rows are contiguous, but the 128-byte swizzle's pattern spans 8 rows (1024 bytes).
    swizzled_rows.compile(SPEC, START=8, ROWS=4)
    expect(TraceError, swizzled_rows, (SPEC,), dict(START=4, ROWS=8), "multiple of 8 rows",
           "swizzle atom of 1024 bytes", "not at row 4", line_text="the view")


@ad.kernel(grid=(1,))
def tma_into_a_misaligned_window(x, y):
    buf = ad.smem((128, 32), x.dtype)  # rows of 64 bytes
    landed = ad.barrier()
    ad.async_copy(x.at[0:8], buf.at[ad.ds(1, 8)], barrier=landed)  # the copy
    landed.wait()
    ad.async_copy(buf.at[ad.ds(1, 8)], y.at[0:8])
    ad.await_async_copy(0)


def test_a_tma_copy_into_a_window_off_128_bytes_is_refused():
    spec = ad.ArraySpec((128, 32), ad.bfloat16)
    expect(CopyError, tma_into_a_misaligned_window, (spec, spec), {}, "128-byte aligned", "64 bytes into",
           line_text="the copy")


@ad.kernel(grid=(2,))
def traced_window(x, y, STEP: ad.constexpr):
    buf = ad.smem(x.shape, x.dtype, transforms=tiling(x.dtype, 128), swizzle=128)
    row = ad.program_id(0) * STEP
    landed = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, 64)], buf.at[ad.ds(row, 64)], barrier=landed)
    landed.wait()
    ad.async_copy(buf.at[ad.ds(row, 64)], y.at[ad.ds(0, 64)])
    ad.await_async_copy(0)


@pytest.mark.parametrize("step, error, fragment", [
    (4, InterpretError, "multiple of 8 rows"),
    (72, OutOfBoundsError, "valid starts: 0 .. 64"),
])
def test_traced_starts_the_rules_refuse_are_interpreter_errors(step, error, fragment):
    x = random_bits((128, 64), ad.bfloat16, 5)
    with pytest.raises(error, match=fragment):
        traced_window.interpret(x, np.zeros_like(x), STEP=step)


@ad.kernel(grid=(1,))
def bulk_into_a_window(x, y, START: ad.constexpr):
    buf = ad.smem((64, 4), x.dtype)  # rows of 8 bytes
    landed = ad.barrier()
    ad.async_copy(x.at[0:8], buf.at[ad.ds(START, 8)], barrier=landed, oob="undefined")  # the copy
    landed.wait()
    ad.async_copy(buf.at[ad.ds(START, 8)], y.at[0:8], oob="undefined")
    ad.await_async_copy(0)


def test_a_bulk_copy_into_a_window_off_16_bytes_is_refused():
    spec = ad.ArraySpec((64, 4), ad.bfloat16)
    expect(CopyError, bulk_into_a_window, (spec, spec), dict(START=1), "bulk copy", "16-byte aligned",
           "8 bytes into", line_text="the copy")


def test_a_bulk_copy_through_an_aligned_window():
    x = random_bits((64, 4), ad.bfloat16, 6)
    y = np.zeros_like(x)
    bulk_into_a_window.interpret(x, y, START=2)
    assert y[:8].tobytes() == x[:8].tobytes() and not y[8:].any()


@ad.kernel(grid=(1,))
def bulk_traced_window(x, y, ROW: int):
    buf = ad.smem((64, 4), x.dtype)
    landed = ad.barrier()
    ad.async_copy(x.at[0:8], buf.at[ad.ds(ROW, 8)], barrier=landed, oob="undefined")
    landed.wait()


def test_a_bulk_copy_into_a_window_off_16_bytes_at_a_traced_start_is_an_interpreter_error():
    x = random_bits((64, 4), ad.bfloat16, 7)
    with pytest.raises(InterpretError, match="not 16-byte aligned"):
        bulk_traced_window.interpret(x, np.zeros_like(x), 3)
