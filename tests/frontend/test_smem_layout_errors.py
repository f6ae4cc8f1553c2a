"""Buffers that carry their layout, misused: TraceErrors at the user's line saying the rule, and
for a copy that contradicts its buffer, naming the buffer's allocation line too."""

from __future__ import annotations

import pytest
from support import line_of

import asyncdsl as ad

BF16 = ad.ArraySpec((64, 128), ad.bfloat16)


def _expect(kernel, line_text: str, *fragments):
    with pytest.raises(ad.TraceError) as caught:
        kernel.compile(BF16, BF16)
    error = caught.value
    for fragment in fragments:
        assert fragment in error.message, (fragment, error.message)
    assert error.location is not None and error.location.line == line_of(kernel.fn, line_text), error
    return error


@ad.kernel(grid=(1,))
def contradicting_copy(x, y, SWIZZLE: ad.constexpr, TILE: ad.constexpr):
    buf = ad.smem(x.shape, x.dtype, transforms=ad.TileTransform((8, 64)), swizzle=128)  # allocated here
    bar = ad.barrier()
    ad.async_copy(x.at[...], buf, barrier=bar, swizzle=SWIZZLE, transforms=ad.TileTransform(TILE))  # the copy
    bar.wait()


@pytest.mark.parametrize("swizzle,tile", [(64, (8, 64)), (128, (8, 32)), (0, (8, 64))])
def test_a_copy_passing_other_transforms_or_swizzle_names_both_lines(swizzle, tile):
    allocated = line_of(contradicting_copy.fn, "allocated here")
    with pytest.raises(ad.TraceError) as caught:
        contradicting_copy.compile(BF16, BF16, SWIZZLE=swizzle, TILE=tile)
    error = caught.value
    assert error.location.line == line_of(contradicting_copy.fn, "the copy"), error
    assert f"{__file__}:{allocated}" in error.message, error.message
    assert "carries transforms (tile(8, 64)) and swizzle 128" in error.message
    assert f"passes transforms (tile{tile}) and swizzle {swizzle}" in error.message


@ad.kernel(grid=(1,))
def repeating_copy(x, y):
    buf = ad.smem(x.shape, x.dtype, transforms=ad.TileTransform((8, 64)), swizzle=128)
    bar = ad.barrier()
    ad.async_copy(x.at[...], buf, barrier=bar, swizzle=128, transforms=ad.TileTransform((8, 64)))
    bar.wait()
    ad.async_copy(buf, y.at[...])
    ad.await_async_copy(0)


def test_a_copy_may_repeat_the_buffers_layout():
    repeating_copy.compile(BF16, BF16)


@ad.kernel(grid=(1,))
def view_into_tiles(x, y):
    buf = ad.smem(x.shape, x.dtype, transforms=ad.TileTransform((8, 64)))
    buf.at[0]  # a tiled dim


def test_a_view_cannot_index_a_tiled_dim():
    _expect(view_into_tiles, "a tiled dim", "cannot index them", "allocated at")


@ad.kernel(grid=(1,))
def bad_swizzle_rows(x, y):
    ad.smem(x.shape, x.dtype, transforms=ad.TileTransform((8, 32)), swizzle=128)  # 64-byte rows


@ad.kernel(grid=(1,))
def dropping_tiling(x, y):
    ad.smem((60, 128), x.dtype, transforms=ad.TileTransform((8, 64), ad.Rounding.DOWN))  # drops rows


def test_layouts_memory_cannot_hold_are_refused_at_the_allocation():
    _expect(bad_swizzle_rows, "64-byte rows", "asyncdsl.smem", "rows of exactly 128 bytes",
            "tile the last dim by 64")
    _expect(dropping_tiling, "drops rows", "drops elements")


@ad.kernel(grid=(1,))
def gather_into_laid_out(x, y):
    buf = ad.smem((4, 128), x.dtype, transforms=ad.TileTransform((4, 64)))
    rows = ad.smem((4,), ad.uint32)
    bar = ad.barrier()
    ad.async_gather(x.at[:, 0:128], buf, rows=rows, barrier=bar)  # laid out


def test_copies_that_lay_out_rows_themselves_refuse_laid_out_buffers():
    _expect(gather_into_laid_out, "laid out",
            "async_gather takes a buffer allocated without transforms or swizzle")
