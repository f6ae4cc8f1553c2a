"""Every register-tile kernel the project builds assembles with ptxas for sm_90a: each
elementwise op, conversion and reduction for each dtype and register layout."""

from __future__ import annotations

import itertools
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples, line_of
from tile_kernels import (
    APPROX_OPS,
    COMPUTE,
    LAYOUTS,
    NEGATIONS,
    NOT_NEGATIONS,
    REDUCIBLE,
    C,
    R,
    accumulate,
    add_row_and_column,
    broadcast_back,
    byte_pairs,
    column_blocks,
    convert,
    gathers,
    gmem_round_trip,
    index_on_the_left,
    mask_relayout,
    negated_extremes,
    not_negated,
    masked_element,
    masked_rows,
    op_matrix,
    ops_of,
    reductions,
    relayout,
    scatters,
    splat_at,
    splat_at_reference,
    splat_windows,
    splat_windows_reference,
    split_row_peaks,
    stretch_unit_dims,
    stretch_unit_dims_reference,
    strided_row_totals,
    traced_scalars_with_tiles,
    unit_axis_peaks,
    whole_tile_totals,
    window_affine,
)

import asyncdsl as ad
from asyncdsl.interpret import numerics
from asyncdsl.passes.to_ptx.integer_division import reciprocal_multiplier
from asyncdsl.runtime.ptxas import assemble

STORAGE = (ad.float8_e4m3fn, ad.float8_e5m2, ad.int8, ad.int16)


def _spec(dtype, *shape):
    return ad.ArraySpec(shape or (R, C), dtype)


@pytest.mark.parametrize("dtype", COMPUTE, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_elementwise_op_assembles_without_spills(dtype, layout):
    ops = tuple(ops_of(dtype)) + (tuple(APPROX_OPS) if dtype == ad.float32 else ())
    ptx = op_matrix.ptx(_spec(dtype), _spec(dtype), _spec(dtype), _spec(dtype, len(ops), R, C), OPS=ops,
                        LAYOUT=layout)
    log = assemble(ptx, verbose=True)[1]
    assert " 0 bytes stack frame, 0 bytes spill stores" in log, log
    for instruction in ("add.rn" if dtype != ad.int32 else "add.s32", "max", "setp", "selp"):
        assert instruction in ptx
    if dtype == ad.int32:
        assert all(instruction in ptx for instruction in ("div.s32", "shl.b32", "shr.s32", "xor.b32"))


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int32, ad.int8, ad.float8_e4m3fn], ids=str)
def test_gathers_assemble_without_spills(dtype):
    ptx = gathers.ptx(_spec(dtype, 300, 128), _spec(ad.int32, 2, 64), _spec(ad.int32, 2, 128, 2),
                      _spec(dtype, 2, 64, 128), _spec(dtype, 2, 2, 128))
    assert " 0 bytes stack frame, 0 bytes spill stores" in assemble(ptx, verbose=True)[1]
    # every element its own guarded load at a computed address, indices compared unsigned
    width = {4: "f32" if dtype == ad.float32 else "b32", 2: "b16", 1: "u8"}[dtype.itemsize]
    assert re.search(rf"@%p\d+ ld\.global\.{width} ", ptx) and "mul.wide.s32" in ptx and "setp.lt.u32" in ptx


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int32], ids=str)
def test_scatters_assemble_without_spills(dtype):
    ptx = scatters.ptx(_spec(ad.int32, 2, 64), _spec(dtype, 2, 64, 128), _spec(dtype, 300, 128))
    assert " 0 bytes stack frame, 0 bytes spill stores" in assemble(ptx, verbose=True)[1]
    width = {4: "f32" if dtype == ad.float32 else "b32", 2: "b16"}[dtype.itemsize]
    assert re.search(rf"@%p\d+ st\.global\.{width} ", ptx) and "mul.wide.s32" in ptx


def test_traced_scalars_with_tiles_assemble_without_spills():
    ptx = traced_scalars_with_tiles.ptx(_spec(ad.float32), _spec(ad.float32, 2, 6, R, C), 1.5)
    assert " 0 bytes stack frame, 0 bytes spill stores" in assemble(ptx, verbose=True)[1]


def test_a_traced_index_on_the_left_of_int32_tiles_assembles_without_spills():
    ptx = index_on_the_left.ptx(_spec(ad.int32), _spec(ad.int32, 2, 6, R // 2, C))
    assert " 0 bytes stack frame, 0 bytes spill stores" in assemble(ptx, verbose=True)[1]
    assert all(instruction in ptx for instruction in ("div.s32", "shl.b32", "shr.s32", "and.b32", "xor.b32"))


@pytest.mark.parametrize("dtype", COMPUTE, ids=str)
@pytest.mark.parametrize("layout", REDUCIBLE)
def test_reductions_and_their_broadcasts_assemble_without_spills(dtype, layout):
    ptx = reductions.ptx(_spec(dtype), _spec(dtype, 3, R), _spec(dtype, 3, C), LAYOUT=layout)
    assert "shfl.sync.bfly.b32" in ptx and "bar.sync" in ptx
    assemble(ptx)
    log = assemble(broadcast_back.ptx(_spec(dtype), _spec(dtype), LAYOUT=layout), verbose=True)[1]
    assert " 0 bytes spill stores" in log, log


@pytest.mark.parametrize("shape", [(3, 150), (3, 50), (1, 1), (2, 64)], ids=str)
def test_splats_into_windows_of_any_size_assemble_and_match_numpy(ptxas, shape):
    y = np.full((7, 300), -1.0, np.float32)
    ptx = splat_windows.ptx(y, SHAPE=shape)
    ptxas(ptx)
    # An element's coordinates from its number, by the window's dims: multiply-highs, no `div`.
    assert "div." not in ptx and "rem." not in ptx
    assert ("mul.hi.u32" in ptx) == (shape[1] & (shape[1] - 1) != 0)
    expected = splat_windows_reference(y, shape)
    splat_windows.interpret(y, SHAPE=shape)
    assert np.array_equal(y, expected)


@pytest.mark.parametrize("shape", [(4, 160), (8, 96), (2, 320), (4, 256)], ids=str)
def test_windows_whose_rows_a_strided_layout_splits_unevenly_take_the_row_layout(ptxas, shape):
    x = np.random.default_rng(1).standard_normal((10, 400)).astype(np.float32)
    y = np.zeros_like(x)
    ptxas(window_affine.ptx(x, y, SHAPE=shape))
    window_affine.interpret(x, y, SHAPE=shape)
    expected = np.zeros_like(x)
    window = (slice(1, 1 + shape[0]), slice(3, 3 + shape[1]))
    expected[window] = x[window] * np.float32(2) + np.float32(1)
    assert np.array_equal(y, expected)


@pytest.mark.parametrize("shape", [(64, 64), (4, 160), (16, 32), (32, 256)], ids=str)
def test_vectors_from_gmem_broadcast_into_a_matrix_take_its_row_layout(ptxas, shape):
    # The row and the column have fewer elements than threads (or a count no layout of their
    # own divides): their layouts come from the matrix's, chosen first.
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    row = rng.standard_normal(shape[1]).astype(np.float32)
    column = rng.standard_normal(shape[0]).astype(np.float32)
    y = np.zeros_like(x)
    log = assemble(add_row_and_column.ptx(x, row, column, y), verbose=True)[1]
    assert " 0 bytes spill stores" in log, log
    add_row_and_column.interpret(x, row, column, y)
    assert np.array_equal(y, (x + row) + column[:, None])


def test_a_matrix_no_layout_holds_is_refused_at_its_line_before_what_is_broadcast_into_it():
    @ad.kernel(grid=(1,))
    def rows_of_1000(x, row, y):
        window = (ad.ds(0, 8), ad.ds(0, 1000))
        ad.store(y.at[window], ad.load(x.at[window]) + ad.load(row.at[ad.ds(0, 1000)]))

    matrix, vector = ad.ArraySpec((8, 1000), ad.float32), ad.ArraySpec((1000,), ad.float32)
    with pytest.raises(ad.LayoutError, match=r"\(8, 1000\) tile has 8000 elements") as caught:
        rows_of_1000.compile(matrix, vector, matrix)
    assert caught.value.location.line == line_of(rows_of_1000.fn, "ad.store(y.at[window]")


@pytest.mark.parametrize("shape", [(4, 256), (64, 64), (16, 32), (1, 128)], ids=str)
def test_real_size_1_dims_stretch_by_numpy_rules(ptxas, shape):
    # A (1, n) row, an (m, 1) column and a (1, 1) element read from GMEM, stretched over x.
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    row = rng.standard_normal((2, shape[1])).astype(np.float32)
    column = rng.standard_normal((shape[0], 3)).astype(np.float32)
    one = np.array([[0.5]], np.float32)
    y, z = np.zeros_like(x), np.zeros_like(x)
    log = assemble(stretch_unit_dims.ptx(x, row, column, one, y, z), verbose=True)[1]
    assert " 0 bytes spill stores" in log, log
    stretch_unit_dims.interpret(x, row, column, one, y, z)
    expected_y, expected_z = stretch_unit_dims_reference(x, row, column, one)
    assert np.array_equal(y, expected_y) and np.array_equal(z, expected_z)


def test_a_masked_load_of_one_element_is_predicated_by_its_mask(ptxas):
    x, y = np.arange(8, dtype=np.float32), np.zeros(2, np.float32)
    ptx = masked_element.ptx(x, y)
    ptxas(ptx)
    (load,) = [line.strip() for line in ptx.splitlines() if "ld.global" in line]
    assert load.startswith("@%p"), load
    masked_element.interpret(x, y)
    assert y.tolist() == [-5.0, 3.0]


def test_a_splat_into_a_large_window_is_one_store_in_a_loop(ptxas):
    ptx = splat_at.ptx(np.zeros((2000, 2000), np.float32), 0, 0, 1.0, SHAPE=(1000, 1000))  # 10^6 elements
    ptxas(ptx)
    assert ptx.count("st.global") == 1 and len(ptx.splitlines()) < 200


WINDOWS = st.tuples(st.integers(1, 4), st.integers(1, 300))


@settings(max_examples=examples(25), deadline=None)
@given(shape=WINDOWS, row=st.integers(-5, 9), col=st.integers(-320, 320))
def test_a_splat_lands_where_its_window_meets_the_array(shape, row, col):
    y = np.full((7, 300), -1.0, np.float32)
    assemble(splat_at.ptx(y, row, col, 2.5, SHAPE=shape))
    expected = splat_at_reference(y, row, col, 2.5, shape)
    splat_at.interpret(y, row, col, 2.5, SHAPE=shape)
    assert np.array_equal(y, expected)


@pytest.mark.parametrize("dtype", COMPUTE, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_whole_tile_reductions_assemble_without_spills(dtype, layout):
    ptx = whole_tile_totals.ptx(_spec(dtype), _spec(dtype, 8), _spec(dtype), LAYOUT=layout)
    log = assemble(ptx, verbose=True)[1]
    assert " 0 bytes spill stores" in log, log


@pytest.mark.parametrize("source, target", [
    (s, t) for s, t in itertools.product(COMPUTE + STORAGE, repeat=2) if s != t
], ids=str)
def test_every_conversion_assembles(ptxas, source, target):
    ptxas(convert.ptx(_spec(source), _spec(target), LAYOUT="row"))


@pytest.mark.parametrize("source, target", list(itertools.product(LAYOUTS, repeat=2)))
def test_relayouts_assemble(ptxas, source, target):
    ptxas(relayout.ptx(_spec(ad.float32), _spec(ad.float32), SOURCE=source, TARGET=target))


@pytest.mark.parametrize("source, target", list(itertools.product(LAYOUTS, repeat=2)))
def test_mask_relayouts_assemble(ptxas, source, target):
    # Predicates go through the scratch as 16-bit integers: `st`/`ld` take no `.pred` operand.
    ptxas(mask_relayout.ptx(_spec(ad.float32), _spec(ad.float32), SOURCE=source, TARGET=target))


def test_a_register_accumulator_across_a_loop_stays_in_registers():
    log = assemble(accumulate.ptx(_spec(ad.bfloat16, 4, R, C), _spec(ad.float32)), verbose=True)[1]
    assert " 0 bytes spill stores" in log, log


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int32], ids=str)
def test_gmem_windows_assemble_and_move_in_vectors_when_they_stay_inside(ptxas, dtype):
    spec = _spec(dtype, 100, 37)
    ptxas(masked_rows.ptx(spec, spec, ROWS=8, COLUMNS=64))
    inside = _spec(dtype, 65, 128)
    ptx = gmem_round_trip.ptx(inside, inside, LAYOUT="row")
    ptxas(ptx)
    assert "ld.global.v4" in ptx and "st.global.v4" in ptx


@ad.kernel(grid=lambda x, y: (x.shape[0],))
def _row_per_cta(x, y):
    row = ad.ds(ad.program_id(0), 1)
    ad.store(y.at[row, :], ad.load(x.at[row, :], other=0.0) * 2)


@ad.kernel(grid=lambda x, y: (x.shape[0],))
def _shifted_columns(x, y):
    columns = ad.ds(ad.program_id(0), x.shape[1])
    ad.store(y.at[:, columns], ad.load(x.at[:, columns], other=0.0) * 2)


def test_a_window_at_a_traced_row_moves_in_guarded_vectors(ptxas):
    spec = ad.ArraySpec((64, 1024), ad.bfloat16)
    ptx = _row_per_cta.ptx(spec, spec)
    ptxas(ptx)
    loads = [line for line in ptx.splitlines() if "ld.global" in line]
    stores = [line for line in ptx.splitlines() if "st.global" in line]
    # 1024 bf16 over 128 threads: one 16-byte vector each way, behind the row's bounds check
    assert len(loads) == len(stores) == 1 and "v4" in loads[0] and "v4" in stores[0]
    assert loads[0].lstrip().startswith("@") and stores[0].lstrip().startswith("@")


def test_a_traced_start_along_the_vector_moves_element_by_element(ptxas):
    spec = ad.ArraySpec((8, 256), ad.bfloat16)
    ptx = _shifted_columns.ptx(spec, spec)
    ptxas(ptx)
    assert "ld.global.v" not in ptx and "st.global.v" not in ptx


def test_a_traced_start_proved_a_multiple_of_the_vector_moves_in_guarded_vectors(ptxas):
    # Columns from program_id * 1024 in rows of 1000 (a multiple of 8): each vector of 8 is
    # wholly inside the row or wholly past its end, so its first element's check serves it.
    spec = ad.ArraySpec((4, 1000), ad.bfloat16)
    ptx = column_blocks.ptx(spec, spec, WIDTH=1024)
    ptxas(ptx)
    loads = [line for line in ptx.splitlines() if "ld.global" in line]
    assert loads and all("v4" in line and line.lstrip().startswith("@") for line in loads)
    # Rows of 1001: a vector may straddle the end, so elements move one by one.
    odd = ad.ArraySpec((4, 1001), ad.bfloat16)
    assert "ld.global.v" not in column_blocks.ptx(odd, odd, WIDTH=1024)


def test_guarded_column_vectors_agree_with_numpy_in_the_interpreter():
    # exact sums
    x = (np.arange(3 * 1000) % 97).astype(np.float32).reshape(3, 1000).astype(ml_dtypes.bfloat16)
    y = np.full_like(x, np.nan)
    column_blocks.interpret(x, y, WIDTH=1024)
    assert np.array_equal(y.astype(np.float32), x.astype(np.float32) * 2 + 1)


def test_a_splat_stored_to_a_small_gmem_window_is_stored_an_element_a_thread(ptxas):
    # A strided tile reduces to a splat; its per-row total goes to a one-element window, and a
    # splat tile to a 3x5 window: thread t stores elements t, t + 128, ... in a loop that ends at
    # the window's size (1, 1 and 15), one predicated scalar store per window.
    x = ad.ArraySpec((6, 1024), ad.bfloat16)
    ptx = strided_row_totals.ptx(x, ad.ArraySpec((6,), ad.float32), ad.ArraySpec((6,), ad.float32),
                                 ad.ArraySpec((3, 6), ad.float32))
    ptxas(ptx)
    stores = [line.strip() for line in ptx.splitlines() if "st.global" in line]
    assert len(stores) == 3 and all(line.startswith("@") and ".v" not in line for line in stores)
    assert len(re.findall(r"setp\.ge\.u32 %p\d+, %r\d+, (?:1|15);", ptx)) == 3


def test_per_row_totals_of_a_strided_tile_agree_with_numpy_in_the_interpreter():
    rng = np.random.default_rng(3)
    x = rng.integers(-50, 50, (6, 1024)).astype(ml_dtypes.bfloat16)  # integer sums are exact
    totals, peaks = np.full(6, np.nan, np.float32), np.full(6, np.nan, np.float32)
    corner = np.zeros((3, 6), np.float32)
    strided_row_totals.interpret(x, totals, peaks, corner)
    wide = x.astype(np.float32)
    assert np.array_equal(totals, wide.sum(axis=1)) and np.array_equal(peaks, wide.max(axis=1))
    expected = np.zeros((3, 6), np.float32)
    expected[1:, 2:] = 2.5  # rows 1-3 and columns 2-6 of the window, clipped by the array
    assert np.array_equal(corner, expected)


@pytest.mark.parametrize("through_smem", [False, True])
def test_a_strided_tile_reduced_over_its_unit_axis_keeps_its_registers(ptxas, through_smem):
    # Nothing to combine: no shuffle, no scratch; the product is the square of every element.
    x = (np.arange(1024) % 23 - 11).reshape(1, 1024).astype(ml_dtypes.bfloat16)
    y = np.full((1, 1024), np.nan, np.float32)
    unit_axis_peaks.interpret(x, y, THROUGH_SMEM=through_smem)
    assert np.array_equal(y, x.astype(np.float32) ** 2)
    ptx = unit_axis_peaks.ptx(x, y, THROUGH_SMEM=through_smem)
    ptxas(ptx)
    assert "shfl" not in ptx and "max.NaN" not in ptx


def test_a_full_reduction_of_a_strided_tile_goes_through_shared_memory_and_back(ptxas):
    # Each warpgroup's half-row maximum is a splat (a strided tile reduces over all its axes to
    # one); written to shared memory, read back by every thread of both warpgroups, it scales the
    # row: one ld.shared.f32 per half, the same address in every thread.
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((5, 2048)) * 4 + np.arange(5)[:, None] * 3).astype(ml_dtypes.bfloat16)
    peaks, y = np.full(5, np.nan, np.float32), np.zeros_like(x)
    split_row_peaks.interpret(x, peaks, y)
    wide = x.astype(np.float32)
    assert np.array_equal(peaks, wide.max(axis=1))
    assert np.array_equal(y, (wide - peaks[:, None]).astype(ml_dtypes.bfloat16))
    ptx = split_row_peaks.ptx(x, peaks, y)
    ptxas(ptx)
    assert len(re.findall(r"ld\.shared\.f32 %f\d+, \[%r\d+\];", ptx)) == 2


@pytest.mark.parametrize("columns", [1000, 1001])
def test_8_bit_tiles_in_2_element_vectors_move_as_halfwords_holding_both(ptxas, columns):
    spec = ad.ArraySpec((5, columns), ad.int8)
    ptx = byte_pairs.ptx(spec, spec)
    ptxas(ptx)
    accesses = [line for line in ptx.splitlines() if ".global." in line and ("ld." in line or "st." in line)]
    width = "b16" if columns % 2 == 0 else "u8"
    assert accesses and all(width in line for line in accesses)
    x = (np.arange(5 * columns) % 120).astype(np.int8).reshape(5, columns)
    y = np.full_like(x, -7)
    byte_pairs.interpret(x, y)
    expected = np.full_like(x, -7)
    expected[:, :1024] = x[:, :1024] + 1
    assert np.array_equal(y, expected)


@ad.kernel(grid=(1,))
def _abs_reduced(x, y, AXIS: ad.constexpr):
    """y = max(|x|, axis=AXIS) broadcast back over x's (1, 1024) row."""
    t = ad.load(x.at[:, :], layout=ad.strided(8))
    ad.store(y.at[:, :], abs(t).max(axis=AXIS)[None, :] if AXIS == 0 else abs(t).max(axis=1)[:, None] + t)


@pytest.mark.parametrize("op, folded", [("abs_maximum", True), ("abs_sub", True), ("abs_where", False),
                                        ("abs", False)])
def test_abs_lowers_to_abs_f32_only_where_no_user_sees_a_nans_bits(ptxas, op, folded):
    # abs.f32 is an add that makes a NaN canonical; its users here either do the same or not.
    f32 = _spec(ad.float32)
    ptx = op_matrix.ptx(f32, f32, f32, _spec(ad.float32, 1, R, C), OPS=(op,), LAYOUT="row")
    assert ("abs.f32" in ptx) == folded
    assert ("0x7fffffff;" in ptx) == (not folded)
    assemble(ptx)
    bf16 = _spec(ad.bfloat16)  # no 16-bit form: the sign mask, always
    assert "abs." not in op_matrix.ptx(bf16, bf16, bf16, _spec(ad.bfloat16, 1, R, C), OPS=(op,), LAYOUT="row")


@pytest.mark.parametrize("axis, folded", [(1, True), (0, False)])
def test_abs_under_a_reduction_folds_unless_the_reduction_combines_nothing(ptxas, axis, folded):
    # Over the unit axis 0 each result is the element itself, its bits and all.
    ptx = _abs_reduced.ptx(_spec(ad.float32, 1, 1024), _spec(ad.float32, 1, 1024), AXIS=axis)
    assert ("abs.f32" in ptx) == folded
    assert ("0x7fffffff;" in ptx) == (not folded)
    assemble(ptx)


@ad.kernel(grid=(1,))
def _tile_divided(x, y, DIVISOR: ad.constexpr):
    ad.store(y.at[:, :], ad.load(x.at[:, :]) / DIVISOR)


@ad.kernel(grid=(1,))
def _scalar_divided(x, y, s: float, DIVISOR: ad.constexpr):
    ad.store(y.at[:, :], ad.load(x.at[:, :]) * (s / DIVISOR))


@pytest.mark.parametrize("dtype, divisor, divides", [
    (ad.float32, 2.0, False), (ad.float32, -0.125, False), (ad.float32, 2.0 ** 100, False),
    (ad.float32, 2.0 ** -127, False), (ad.float32, 2.0 ** -128, True), (ad.float32, 3.0, True),
    (ad.bfloat16, 0.5, False), (ad.float16, 2.0 ** -15, False), (ad.float16, 2.0 ** -16, True),
    (ad.float16, 2.0 ** 20, True)], ids=str)
def test_a_division_by_a_power_of_two_is_a_product_by_its_reciprocal(ptxas, dtype, divisor, divides):
    # Where the divisor and its reciprocal are exact in the tile's dtype (not 2^128 in float32,
    # nor 2^16 or 2^20, past float16's largest): both round the same real number once.  A division's
    # slow path is a call, and what lives across it spills.
    ptx = _tile_divided.ptx(_spec(dtype), _spec(dtype), DIVISOR=divisor)
    assert ("div.rn.f32" in ptx) == divides
    assert ("mul.rn" in ptx) != divides
    log = assemble(ptx, verbose=True)[1]
    assert divides or " 0 bytes stack frame" in log, log
    if dtype == ad.float32:
        scalar = _scalar_divided.ptx(_spec(dtype), _spec(dtype), 1.0, DIVISOR=divisor)
        assert scalar.count("div.rn.f32") == divides


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.float16], ids=str)
def test_the_powers_of_two_the_lowering_knows_are_the_dtypes(dtype):
    from asyncdsl.passes.to_ptx.tile_math import POWERS_OF_TWO

    limits = ml_dtypes.finfo(dtype.numpy)
    lowest, highest = POWERS_OF_TWO[dtype.name]
    assert 2.0**lowest == float(limits.smallest_subnormal)
    assert 2.0**highest <= float(limits.max) < 2.0 ** (highest + 1)


@ad.kernel(grid=(1,))
def _floor_divided(x, y, DIVISOR: ad.constexpr):
    t = ad.load(x.at[:, :])
    ad.store(y.at[:, :], t // DIVISOR + t % DIVISOR)


@pytest.mark.parametrize("divisor, instruction", [(8, "shr.s32"), (1, "shr.s32"), (7, "mul.hi.u32"),
                                                  (1000003, "mul.hi.u32"), (2**31 - 1, "mul.hi.u32"),
                                                  (-3, "mul.hi.u32"), (-8, "shr.u32"), (-1, "set.le.s32")])
def test_a_floor_division_by_a_constant_divides_no_integer(divisor, instruction):
    # A (64, 256) int32 tile: 128 elements a thread, whose signed divisions and fix-ups by 7
    # made ptxas spill 5.8 KB a thread; and no `div` at all, which ptxas expands in full even by
    # a constant (docs/hardware.md §19).
    spec = _spec(ad.int32, 64, 256)
    ptx = _floor_divided.ptx(spec, spec, DIVISOR=divisor)
    assert instruction in ptx
    assert "div." not in ptx and "rem." not in ptx
    log = assemble(ptx, verbose=True)[1]
    assert " 0 bytes stack frame, 0 bytes spill stores" in log, log


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(-(2**31), 2**31 - 1), st.integers(1, 2**31 - 1))
def test_floor_division_by_a_positive_divisor_is_an_unsigned_one_of_the_magnitude(a, d):
    # What the lowering emits for a constant d > 0: s = a >> 31, then s ^ ((a ^ s) / d) with an
    # unsigned division (a ^ s is a for a >= 0 and -a - 1 otherwise, never negative).
    sign = -1 if a < 0 else 0
    assert (a ^ sign) >= 0
    assert ((a ^ sign) // d) ^ sign == a // d


def _int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(st.integers(-(2**31), 2**31 - 1),
                 st.sampled_from([-(2**31), -(2**31) + 1, -1, 0, 1, 2**31 - 1])),
       st.one_of(st.integers(1, 2**31), st.sampled_from([1, 2, 3, 2**31 - 1, 2**31])))
def test_floor_division_by_a_negative_divisor_is_an_unsigned_one_of_the_magnitude(a, m):
    # What the lowering emits for a constant -m < 0: u = -1 where a <= 0 (else 0), then
    # ~(u ^ (((a - 1) ^ u) / m)) with an unsigned division of a magnitude of at most 2^31
    # (2^31 for a = INT_MIN), the result wrapping at the int32 ends as the quotient does.
    u = -1 if a <= 0 else 0
    magnitude = (_int32(a - 1) ^ u) % 2**32
    assert magnitude <= 2**31
    assert _int32(~(u ^ (magnitude // m))) == _int32(a // -m)


@settings(max_examples=examples(500), deadline=None)
@given(st.integers(3, 2**31 - 1).filter(lambda d: d & (d - 1)), st.data())
def test_a_multiply_high_and_a_shift_divide_every_magnitude_up_to_two_to_the_31(d, data):
    multiplier, shift = reciprocal_multiplier(d)
    assert 0 < multiplier < 2**32 and shift >= 1
    edges = [0, 1, d - 1, d, d + 1, 2**31 - 1, 2**31, 2**31 // d * d, 2**31 // d * d - 1]
    for n in [*edges, data.draw(st.integers(0, 2**31))]:
        if 0 <= n <= 2**31:
            assert ((n * multiplier) >> 32) >> shift == n // d


@ad.kernel(grid=(1,))
def _remainder(x, y, MODULUS: ad.constexpr):
    ad.store(y.at[:, :], ad.load(x.at[:, :]) % MODULUS)


@pytest.mark.parametrize("modulus", [1, 8, 2**30])
def test_a_remainder_by_a_power_of_two_is_a_mask(ptxas, modulus):
    spec = _spec(ad.int32, 64, 128)
    assert "arith.andi" in _remainder.ir(spec, spec, MODULUS=modulus)
    assert "arith.floordivsi" not in _remainder.ir(spec, spec, MODULUS=modulus)
    ptx = _remainder.ptx(spec, spec, MODULUS=modulus)
    assert "and.b32" in ptx and "shr.s32" not in ptx and "div." not in ptx
    ptxas(ptx)


@given(st.integers(-(2**31), 2**31 - 1), st.integers(0, 31))
def test_python_remainder_by_a_power_of_two_is_the_low_bits(a, k):
    # Two's complement: -5 % 8 == 3 == -5 & 7, and the int32 extremes alike.
    assert a % 2**k == a & (2**k - 1)


@ad.kernel(grid=(1,))
def _to_float8(x, y, VECTOR: ad.constexpr):
    """y = x as y's float8 type, x read in vectors of VECTOR elements."""
    ad.store(y.at[:, :], ad.load(x.at[:, :], layout=ad.strided(VECTOR)).astype(y.dtype))


@pytest.mark.parametrize("target", [ad.float8_e4m3fn, ad.float8_e5m2], ids=str)
@pytest.mark.parametrize("vector, conversions, packing", [(1, 32, "st.global.u8"), (2, 16, "cvt.u32.u16"),
                                                          (16, 16, "mov.b32 %r")])
def test_floats_convert_to_float8_a_pair_at_a_time_and_store_the_pairs_whole(
        ptxas, target, vector, conversions, packing):
    # 32 elements a thread: one `cvt ...x2` per element when a thread's vectors hold one (stored a
    # byte at a time), else one per pair, whose halfwords the store packs as they are (no byte
    # inserts).
    x = np.random.default_rng(3).standard_normal((4, 1024)).astype(np.float32) * 300
    x[0, :8] = [np.nan, -np.nan, np.inf, -np.inf, 1e6, -1e6, 0.0, -0.0]
    ptx = _to_float8.ptx(x, ad.ArraySpec((4, 1024), target), VECTOR=vector)
    ptxas(ptx)
    assert ptx.count("cvt.rn.satfinite") == conversions
    assert packing in ptx and "bfi.b32" not in ptx
    y = np.zeros((4, 1024), target.numpy)
    _to_float8.interpret(x, y, VECTOR=vector)
    finite = ml_dtypes.finfo(target.numpy).max
    expected = np.clip(x, -finite, finite).astype(target.numpy)  # saturating; NaN stays NaN
    assert np.array_equal(np.isnan(y.astype(np.float32)), np.isnan(x))
    assert np.array_equal(y[~np.isnan(x)].view(np.uint8), expected[~np.isnan(x)].view(np.uint8))


@pytest.mark.parametrize("form", NEGATIONS)
def test_an_integer_negation_is_not_then_add_one_which_ptxas_keeps_under_min_max(ptxas, form):
    # ptxas folds a negation it recognises into a three-input min/max and loses it (docs/hardware.md
    # §20); `not` + `add 1` is the same two's complement, wrapping at -2^31 alike.
    x = np.random.default_rng(5).integers(-2**31, 2**31, (64, 64)).astype(np.int32)
    x[0, :3] = [-2**31, 2**31 - 1, 0]
    y = np.zeros_like(x)
    spec = ad.ArraySpec((64, 64), ad.int32)
    ptx = negated_extremes.ptx(spec, spec, FORM=form)
    zero = re.findall(r"mov\.b32 (%r\d+), 0x0;", ptx)
    assert ptx.count("not.b32") == 64 * 64 // 128  # each thread's 32 elements
    subtractions = [line for line in ptx.splitlines() if "sub.s32" in line]
    assert not [line for line in subtractions if any(f", {z}, " in line for z in zero)]
    ptxas(ptx)
    negated_extremes.interpret(x, y, FORM=form)
    with np.errstate(over="ignore"):
        negated = (np.int32(0) - x).astype(np.int32)
        assert np.array_equal(y, negated + negated.max() - negated.min())


@pytest.mark.parametrize("form", NOT_NEGATIONS)
def test_integer_ops_that_only_look_like_a_negation_keep_their_instruction(ptxas, form):
    x = np.random.default_rng(6).integers(-2**31, 2**31, (64, 64)).astype(np.int32)
    y = np.zeros_like(x)
    spec = ad.ArraySpec((64, 64), ad.int32)
    ptx = not_negated.ptx(spec, spec, FORM=form)
    assert "not.b32" not in ptx
    ptxas(ptx)
    not_negated.interpret(x, y, FORM=form)
    with np.errstate(over="ignore"):
        assert np.array_equal(y, NOT_NEGATIONS[form][1](x).astype(np.int32))


ROW = 1024  # one strided(8) row: 8 elements a thread


@ad.kernel(grid=lambda x, y: (1,))
def _nan_constants(x, y):
    """y[0] = x where it is positive, else a NaN constant; y[1] = x's row loaded past its end
    (the NaN `other` fills the columns from ROW - 8 on)."""
    v = ad.load(x.at[ad.ds(0, 1), ad.ds(0, ROW)], layout=ad.strided(8))
    ad.store(y.at[ad.ds(0, 1), ad.ds(0, ROW)], ad.where(v > 0.0, v, float("nan")))
    past = ad.load(x.at[ad.ds(0, 1), ad.ds(8, ROW)], layout=ad.strided(8), other=float("nan"))
    ad.store(y.at[ad.ds(1, 1), ad.ds(0, ROW)], past)


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.float16], ids=str)
def test_a_nan_constant_is_the_canonical_nan_in_registers_and_in_the_interpreter(dtype):
    # A NaN constant reaches memory through `mov`, `selp` and a store bit for bit: the immediate
    # must be the NaN the interpreter gives the constant, not numpy's 0x7fc00000.
    x = np.linspace(-1.0, 1.0, ROW).reshape(1, ROW).astype(dtype.numpy)
    y = np.zeros((2, ROW), dtype.numpy)
    _nan_constants.interpret(x, y)
    unsigned = f"u{dtype.numpy.itemsize}"
    nans = {int(bits) for bits in y.view(unsigned)[np.isnan(y.astype(np.float32))]}
    assert nans == {int(numerics.canonical_nan(dtype.numpy).view(unsigned))}
    ptx = _nan_constants.ptx(ad.ArraySpec((1, ROW), dtype), ad.ArraySpec((2, ROW), dtype))
    moved = re.findall(r"mov\.\w+ %\w+, (0f[0-9A-F]{8}|0x[0-9a-f]+);", ptx)
    immediates = {int(text[2:], 16) for text in moved}
    assert nans <= immediates
    assert not immediates & {0x7FC00000, 0x7FC0, 0x7E00}
