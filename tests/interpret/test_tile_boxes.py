"""Copies through a 2-d tiling from arrays that are not whole tiles (`passes/resolve/tile_boxes.py`):
the bytes land where the layout says, for tiles taller than a TMA box too, and reads past the
array's edge are zeros."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl import TileTransform


@ad.kernel(grid=(1,), block=128)
def _round_trip(x, y, ROWS: ad.constexpr, TILE_ROWS: ad.constexpr, COLUMNS: ad.constexpr):
    buf = ad.smem((ROWS, COLUMNS), x.dtype, transforms=TileTransform((TILE_ROWS, 64)), swizzle=128)
    landed = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, ROWS), ad.ds(0, COLUMNS)], buf, barrier=landed)
    landed.wait()
    ad.async_copy(buf, y.at[ad.ds(0, ROWS), ad.ds(0, COLUMNS)])
    ad.await_async_copy(0)


@pytest.mark.parametrize("rows,tile_rows,columns",
                         [(264, 264, 64), (512, 512, 64), (64, 8, 128), (64, 64, 192)])
def test_a_tiled_round_trip_through_a_ragged_array_is_exact(rows, tile_rows, columns):
    x = np.random.default_rng(rows).standard_normal((rows + 3, columns + 8)).astype(ml_dtypes.bfloat16)
    y = np.zeros_like(x)
    _round_trip.interpret(x, y, ROWS=rows, TILE_ROWS=tile_rows, COLUMNS=columns)
    assert np.array_equal(y[:rows, :columns].view(np.uint16), x[:rows, :columns].view(np.uint16))
    assert not y[rows:].any() and not y[:, columns:].any()


@ad.kernel(grid=(1,), block=128)
def _one_head(x, y, START: ad.constexpr, HEAD: ad.constexpr):
    """Rows START.. of head HEAD of a (B, S, H, D) array: a window whose dims (S and D) have the
    squeezed head between them, through a tiled, swizzled buffer."""
    buf = ad.smem((64, x.shape[3]), x.dtype, transforms=TileTransform((64, 64)), swizzle=128)
    landed = ad.barrier()
    ad.async_copy(x.at[0, ad.ds(START, 64), HEAD, :], buf, barrier=landed)
    landed.wait()
    ad.async_copy(buf, y.at[0, ad.ds(START, 64), HEAD, :])
    ad.await_async_copy(0)


@pytest.mark.parametrize("sequence,start", [(100, 64), (70, 0), (64, 0)])
def test_rows_of_one_head_of_a_bshd_array_copy_as_boxes(sequence, start):
    x = np.random.default_rng(sequence).standard_normal((1, sequence, 3, 128)).astype(ml_dtypes.bfloat16)
    y = np.zeros_like(x)
    _one_head.interpret(x, y, START=start, HEAD=1)
    rows = slice(start, min(start + 64, sequence))
    assert np.array_equal(y[0, rows, 1].view(np.uint16), x[0, rows, 1].view(np.uint16))
    y[0, rows, 1] = 0
    assert not y.any()  # nothing else written, nothing past the sequence's end


@ad.kernel(grid=(2,), block=128, cluster=(2, 1, 1))
def _pair_round_trip(x, y, ROWS: ad.constexpr, TILE_ROWS: ad.constexpr, COLUMNS: ad.constexpr):
    """Both CTAs of a pair load the same ragged window, multicast (each loads part), and CTA i
    stores what landed in its buffer into y[i]."""
    buf = ad.smem((ROWS, COLUMNS), x.dtype, transforms=TileTransform((TILE_ROWS, 64)), swizzle=128)
    landed = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, ROWS), ad.ds(0, COLUMNS)], buf, barrier=landed, collective="x")
    landed.wait()
    ad.async_copy(buf, y.at[ad.cluster_cta_id(0), ad.ds(0, ROWS), ad.ds(0, COLUMNS)])
    ad.await_async_copy(0)


@pytest.mark.parametrize("rows,tile_rows,columns,box", [
    (64, 64, 128, (32, 64)),  # a box a tile, each cut in halves: one from each CTA
    (64, 64, 192, (32, 64)),
    (264, 264, 64, (128, 64)),  # a column of 256 + 8 rows: boxes of 256 and 8 rows, cut in halves
])
def test_a_collective_load_of_a_ragged_array_lands_in_both_ctas(rows, tile_rows, columns, box):
    from asyncdsl.dialects import asyncdsl as ir

    x = np.random.default_rng(columns).standard_normal((rows + 3, columns + 8)).astype(ml_dtypes.bfloat16)
    y = np.zeros((2, *x.shape), x.dtype)
    _pair_round_trip.interpret(x, y, ROWS=rows, TILE_ROWS=tile_rows, COLUMNS=columns)
    for cta in range(2):
        assert np.array_equal(y[cta, :rows, :columns].view(np.uint16), x[:rows, :columns].view(np.uint16))
        assert not y[cta, rows:].any() and not y[cta, :, columns:].any()
    module = _pair_round_trip.compile(x, y, ROWS=rows, TILE_ROWS=tile_rows, COLUMNS=columns).module
    loads = [op for op in module.walk() if isinstance(op, ir.TmaLoadOp)]
    assert all(op.multicast_mask is not None for op in loads)
    assert tuple(loads[0].descriptor.spec().box_dims) == box


@ad.kernel(grid=(1,), block=128)
def _window(x, y, ROWS: ad.constexpr, COLUMNS: ad.constexpr, TILE: ad.constexpr):
    """A (ROWS, COLUMNS) window through a TILE tiling, loaded and stored back."""
    buf = ad.smem((ROWS // TILE[0], COLUMNS // TILE[1], *TILE), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, ROWS), ad.ds(0, COLUMNS)], buf, barrier=bar, transforms=[TileTransform(TILE)])
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(0, ROWS), ad.ds(0, COLUMNS)], transforms=[TileTransform(TILE)])
    ad.await_async_copy(0)


def test_tiles_whose_boxes_tma_cannot_place_are_refused_while_compiling():
    # float32 (4, 4) tiles are 64 bytes: one box a tile would land at 64-byte SMEM offsets, where
    # TMA faults; 32 rows are whole tiles (one tiled box), 31 are not.
    x = np.arange(31 * 128, dtype=np.float32).reshape(31, 128)
    refused = r"test_tile_boxes.py:\d+: .*64-byte tiles .* no multiple of 128 bytes"
    with pytest.raises(ad.CopyError, match=refused):
        _window.ptx(x, np.zeros_like(x), ROWS=4, COLUMNS=16, TILE=(4, 4))
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)
    y = np.zeros_like(x)
    _window.interpret(x, y, ROWS=4, COLUMNS=16, TILE=(4, 4))
    assert np.array_equal(y[:4, :16], x[:4, :16]) and not y[4:].any() and not y[:, 16:].any()


def test_tiles_of_128_bytes_from_a_ragged_array_go_one_box_each():
    x = np.arange(31 * 128, dtype=np.float32).reshape(31, 128) + 1
    y = np.zeros_like(x)
    _window.interpret(x, y, ROWS=8, COLUMNS=16, TILE=(8, 4))
    assert np.array_equal(y[:8, :16], x[:8, :16]) and not y[8:].any() and not y[:, 16:].any()


def test_a_tile_larger_than_the_window_is_refused_at_the_copy():
    x = np.zeros((40, 4), np.float32)

    @ad.kernel(grid=(1,), block=128)
    def too_tall(x, y):
        buf = ad.smem((16, 4), ad.float32)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(0, 16), ad.ds(0, 4)], buf, barrier=bar, transforms=(TileTransform((17, 4)),))
        bar.wait()

    refused = r"test_tile_boxes.py:\d+: slice shape \(16, 4\) is not a multiple of the tiling \(17, 4\)"
    with pytest.raises(ad.TransformError, match=refused):
        too_tall.ptx(x, x)
