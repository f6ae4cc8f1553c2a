"""What contiguous bulk copies and the cp.async fallback cannot do fails with the project's
errors, naming the rule, the numbers and the user's line."""

from __future__ import annotations

import support

import asyncdsl as ad

F32 = ad.float32


def expect(error_type, kernel, specs, *fragments, line_text: str = "# the copy"):
    """Compiling `kernel` raises `error_type` with every fragment, at the line holding `line_text`."""
    support.expect(error_type, kernel, specs, {}, *fragments, line_text=line_text)


def load(shape, window, smem_shape, dtype=F32, barrier=True, **copy_kwargs):
    """A kernel with one GMEM -> SMEM copy of `x.at[window]`, and the spec of its argument."""

    @ad.kernel(grid=(1,))
    def kernel(x):
        buf = ad.smem(smem_shape, x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[window], buf, barrier=bar if barrier else None, **copy_kwargs)  # the copy

    return kernel, (ad.ArraySpec(shape, dtype),)


def cp_async(shape, window, smem_shape, dtype=F32, **copy_kwargs):
    return load(shape, window, smem_shape, dtype, barrier=False, implementation="cp_async", **copy_kwargs)


# -- bulk copies --------------------------------------------------------------------------------


def test_bulk_size_not_a_multiple_of_16_bytes():
    expect(
        ad.CopyError, *load((64, 64), (0, ad.ds(0, 3)), (3,), oob="undefined"),
        "multiple of 16 bytes", "12 bytes",
    )


def test_bulk_static_start_off_16_bytes():
    expect(
        ad.CopyError, *load((64, 64), (0, ad.ds(2, 4)), (4,), oob="promise_in_bounds"),
        "16-byte aligned GMEM address", "starts 8 bytes",
    )


def test_bulk_static_promise_leaving_the_array():
    expect(
        ad.CopyError, *load((64, 64), (ad.ds(60, 8), slice(None)), (8, 64), oob="promise_in_bounds"),
        "oob='promise_in_bounds' but the slice leaves the array", "window [60, 68) along dim 0 of size 64",
    )


def test_bulk_clamp_that_leaves_part_of_16_bytes():
    # 101 f32 are 404 bytes: past element 96 (byte 384) 20 are left.
    expect(
        ad.CopyError, *load((101,), (ad.ds(96, 8),), (8,), oob="undefined"),
        "the 20 bytes left are not a multiple of 16",
    )


def test_bulk_traced_clamp_of_an_array_of_odd_bytes():
    @ad.kernel(grid=(1,))
    def kernel(x):
        buf = ad.smem((8,), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(ad.program_id(0) * 8, 8)], buf, barrier=bar, oob="undefined")  # the copy

    expect(ad.CopyError, kernel, (ad.ArraySpec((101,), F32),), "oob='undefined' clamps", "404 bytes")


def test_bulk_of_sub_byte_elements():
    expect(
        ad.CopyError, *load((64, 64), (0, slice(None)), (64,), dtype=ad.float4_e2m1fn, oob="undefined"),
        "bulk copies of 4-bit elements",
    )


# -- cp.async: the op's own rules (verifier, at trace time) -------------------------------------


def test_cp_async_stores_are_refused():
    @ad.kernel(grid=(1,))
    def kernel(x):
        buf = ad.smem((8, 64), x.dtype)
        ad.async_copy(buf, x.at[ad.ds(0, 8), :], implementation="cp_async")  # the copy

    expect(ad.TraceError, kernel, (ad.ArraySpec((64, 64), F32),), "copies GMEM -> SMEM only")


def test_cp_async_collective_is_refused():
    @ad.kernel(grid=(2,), cluster=(2, 1, 1))
    def kernel(x):
        buf = ad.smem((8, 64), x.dtype)
        ad.async_copy(x.at[ad.ds(0, 8), :], buf, implementation="cp_async", collective="x")  # the copy

    expect(ad.TraceError, kernel, (ad.ArraySpec((64, 64), F32),), "cannot be collective")


def test_cp_async_predicate_is_refused():
    @ad.kernel(grid=(2,))
    def kernel(x):
        buf = ad.smem((8, 64), x.dtype)
        first = ad.program_id(0) == 0
        ad.async_copy(x.at[ad.ds(0, 8), :], buf, implementation="cp_async", predicate=first)  # the copy

    spec = (ad.ArraySpec((64, 64), F32),)
    expect(ad.TraceError, kernel, spec, "every thread of the warpgroup", "no predicate")


def test_cp_async_reduction_is_refused():
    @ad.kernel(grid=(1,))
    def kernel(x):
        buf = ad.smem((8, 64), x.dtype)
        ad.async_copy(buf, x.at[ad.ds(0, 8), :], implementation="cp_async", reduction="add")  # the copy

    expect(ad.TraceError, kernel, (ad.ArraySpec((64, 64), F32),), "reduc")


def test_cp_async_has_nothing_to_clamp():
    expect(
        ad.TraceError, *cp_async((64, 64), (ad.ds(0, 8), slice(None)), (8, 64), oob="undefined"),
        "nothing for oob='undefined'",
    )


def test_await_cp_async_copy_range():
    @ad.kernel(grid=(1,))
    def kernel(x):
        ad.await_cp_async_copy(64)  # the wait

    expect(
        ad.TraceError, kernel, (ad.ArraySpec((64, 64), F32),), "allow_groups must be in [0, 63], got 64",
        line_text="# the wait",
    )


# -- cp.async: the plan's rules (resolve-transforms) --------------------------------------------


def test_cp_async_static_window_out_of_bounds():
    expect(
        ad.CopyError, *cp_async((64, 64), (ad.ds(60, 8), slice(None)), (8, 64)),
        "cannot read out of bounds (there is no zero fill)", "window [60, 68) along dim 0 of size 64",
    )


def test_cp_async_static_index_out_of_bounds():
    expect(
        ad.CopyError, *cp_async((4, 64, 64), (ad.ds(3, 2), 0, slice(None)), (2, 64)),
        "window [3, 5) along dim 0 of size 4",
    )


def test_cp_async_without_a_chunk_that_fits():
    # int16 rows of 3 elements (6 bytes), 10 bytes apart: no 4-, 8- or 16-byte chunk fits.
    expect(
        ad.CopyError, *cp_async((64, 5), (ad.ds(0, 8), ad.ds(0, 3)), (8, 3), dtype=ad.int16),
        "4, 8 or 16 aligned bytes per thread", "the row 6 bytes", "the GMEM row stride 10 bytes",
    )


def test_cp_async_static_offset_off_every_chunk():
    expect(
        ad.CopyError, *cp_async((64, 64), (0, ad.ds(1, 8)), (8,), dtype=ad.int16),
        "the slice's static byte offset 2 bytes",
    )


def test_cp_async_window_that_is_not_evenly_strided_rows():
    expect(
        ad.CopyError, *cp_async((4, 8, 16), (ad.ds(0, 2), ad.ds(0, 4), ad.ds(0, 8)), (2, 4, 8)),
        "rows of consecutive elements at one stride",
    )


def test_cp_async_transforms_other_than_one_tile():
    expect(
        ad.CopyError,
        *cp_async((64, 64), (ad.ds(0, 8), slice(None)), (64, 8), transforms=ad.TransposeTransform((1, 0))),
        "no transforms or one 2-D TileTransform",
    )


def test_cp_async_tiled_slice_must_be_2d():
    expect(
        ad.CopyError,
        *cp_async((4, 64, 64), (ad.ds(0, 2), ad.ds(0, 8), slice(None)), (2, 1, 1, 8, 64),
                  transforms=ad.TileTransform((8, 64))),
        "move a 2-D slice",
    )


def test_cp_async_tile_must_divide_the_slice():
    expect(
        ad.CopyError,
        *cp_async((64, 64), (ad.ds(0, 12), slice(None)), (1, 1, 8, 64), transforms=ad.TileTransform((8, 64))),
        "the tiling (8, 64) must divide the slice (12, 64)",
    )


def test_cp_async_swizzle_needs_rows_of_its_width():
    expect(
        ad.CopyError, *cp_async((64, 64), (ad.ds(0, 8), slice(None)), (8, 64), swizzle=128),
        "swizzle 128 needs rows of the slice of exactly 128 bytes (32 elements), got 64 elements (256 bytes)",
    )


def test_cp_async_smem_shape_must_match():
    expect(
        ad.CopyError, *cp_async((64, 64), (ad.ds(0, 8), slice(None)), (8, 32)),
        "SMEM buffer shape (8, 32) does not match the shape of the copied slice (8, 64)",
    )


def test_cp_async_of_sub_byte_elements():
    expect(
        ad.CopyError, *cp_async((64, 64), (ad.ds(0, 8), slice(None)), (8, 64), dtype=ad.int4),
        "cp.async copies of 4-bit elements",
    )
