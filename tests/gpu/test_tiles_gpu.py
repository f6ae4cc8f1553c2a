"""Register tiles on the H200: every op, conversion and reduction of every dtype and layout gives
the interpreter's bits (IEEE class), on random inputs with ±0, ±inf, NaN and subnormals; the
approximate functions stay within the bound docs/register-tiles.md states (the measured errors
are written to $OUT/approx_functions.json)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from gpu_support import gpu_and_interpreter, hopper_or_skip
from hypothesis import given, settings
from hypothesis import strategies as st
from tile_kernels import (
    APPROX_OPS,
    COMPUTE,
    LAYOUTS,
    NEGATIONS,
    REDUCIBLE,
    C,
    R,
    accumulate,
    arg_extrema,
    add_row_and_column,
    broadcast_back,
    byte_pairs,
    column_blocks,
    convert,
    gather_inputs,
    gathers,
    row_gather_inputs,
    row_gathers,
    gmem_round_trip,
    index_on_the_left,
    mask_relayout,
    negated_extremes,
    masked_element,
    masked_rows,
    masked_rows_reference,
    nested_totals,
    numpy_idioms,
    op_matrix,
    ops_of,
    reductions,
    relayout,
    running_total,
    rows_past_the_end,
    scatter_inputs,
    scaled_rows,
    scatters,
    small_tiles,
    unsigned_storage,
    unsigned_storage_reference,
    special_values,
    splat_at,
    splat_at_reference,
    splat_windows,
    splat_windows_reference,
    split_row_peaks,
    stretch_unit_dims,
    strided_row_totals,
    traced_scalars_with_tiles,
    unit_axis_peaks,
    whole_tile_totals,
    window_affine,
)

import asyncdsl as ad
from asyncdsl.dtypes import as_dtype
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

STORAGE = (ad.float8_e4m3fn, ad.float8_e5m2, ad.int8, ad.int16, ad.uint8, ad.uint16)
# Each approximate function's bound against the correctly rounded result, per element: within
# `ulps` float32 ulps or within `absolute` (docs/register-tiles.md has the measured worst cases).
APPROX_BOUNDS = {  # name: (ulps, absolute)
    "exp2": (2, 0.0), "exp2_approx": (2, 0.0), "rsqrt": (2, 0.0), "rsqrt_approx": (2, 0.0),
    "sqrt_approx": (2, 0.0), "exp": (4, 0.0), "exp_approx": (2, 0.0), "log": (2, 2.0 ** -21),
    "log_approx": (2, 2.0 ** -21),
    "log2": (2, 2.0 ** -21), "log2_approx": (2, 2.0 ** -21), "tanh": (128, 2.0 ** -21),
    "sin": (0, 2.0 ** -16), "cos": (0, 2.0 ** -16),
    # The exact compositions: tanh's exp2 is the GPU's own; sin and cos use exact ops only.
    "tanh_exact": (4, 0.0), "sin_exact": (0, 0.0), "cos_exact": (0, 0.0),
}


def _first_difference(gpu: np.ndarray, cpu: np.ndarray, inputs) -> str:
    where = np.argwhere(gpu.view(f"u{gpu.itemsize}") != cpu.view(f"u{cpu.itemsize}"))
    index = tuple(where[0])
    operands = [a[index[-2:]] if a.ndim >= 2 else a for a in inputs]
    return (f"{len(where)} elements differ; first at {index}: GPU {gpu[index]!r} interpreter "
            f"{cpu[index]!r} from {operands}")


@pytest.mark.parametrize("dtype", COMPUTE, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_exact_op_is_bit_exact(dtype, layout):
    ops = tuple(ops_of(dtype))
    inputs = [special_values(dtype, (R, C), seed) for seed in (1, 2, 3)]
    out = np.zeros((len(ops), R, C), dtype.numpy)
    (gpu,), (cpu,) = gpu_and_interpreter(op_matrix, inputs, [out], OPS=ops, LAYOUT=layout)
    for position, name in enumerate(ops):
        same = gpu[position].view(f"u{gpu.itemsize}") == cpu[position].view(f"u{cpu.itemsize}")
        assert same.all(), f"{name}: {_first_difference(gpu[position], cpu[position], inputs)}"


def _ulps(gpu: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|gpu - reference| in float32 ulps of the reference (NaN agreement counts as 0)."""
    both_nan = np.isnan(gpu) & np.isnan(reference)
    same = (gpu == reference) | both_nan
    spacing = np.spacing(np.abs(reference).astype(np.float32)).astype(np.float64)
    spacing = np.maximum(spacing, np.float64(2.0 ** -149))
    error = np.abs(gpu.astype(np.float64) - reference.astype(np.float64)) / spacing
    return np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))


def test_exp_overflows_and_underflows_as_the_interpreter_does():
    edges = [np.inf, -np.inf, np.nan, 0.0, -0.0, 89.0, -110.0, 177.0, -177.0, 1e30, -1e30, 2.3e38,
             -2.3e38, 2.4e38, -2.4e38, 3.4e38, -3.4e38]
    a = np.resize(np.array(edges, np.float32), (R, C))
    out = np.zeros((2, R, C), np.float32)
    (gpu,), (cpu,) = gpu_and_interpreter(op_matrix, [a, a, a], [out], OPS=("exp", "exp_approx"),
                                         LAYOUT="strided")
    assert gpu.tobytes() == cpu.tobytes(), _first_difference(gpu, cpu, [a])


def test_approximate_functions_stay_within_their_bounds():
    ops = tuple(APPROX_OPS)
    rng = np.random.default_rng(7)
    a = np.concatenate([
        rng.uniform(-30, 30, R * C // 2), np.exp2(rng.uniform(-126, 127, R * C // 2)),
    ]).astype(np.float32).reshape(R, C)
    out = np.zeros((len(ops), R, C), np.float32)
    (gpu,), (cpu,) = gpu_and_interpreter(op_matrix, [a, a, a], [out], OPS=ops, LAYOUT="strided")
    measured = {}
    for position, name in enumerate(ops):
        domain = np.isfinite(cpu[position]) & (np.abs(cpu[position]) >= 2.0 ** -126)
        if name in ("sin", "cos"):
            domain &= np.abs(a) <= 100.0  # sin/cos.approx: documented for small arguments
        g, c = gpu[position][domain], cpu[position][domain]
        absolute = np.abs(g.astype(np.float64) - c.astype(np.float64))
        ulps = _ulps(g, c)
        measured[name] = {"max_ulps": float(ulps.max()), "max_abs": float(absolute.max()),
                          "max_ulps_where_abs_above_2^-21": float(ulps[absolute > 2.0 ** -21].max(initial=0))}
        bound_ulps, bound_abs = APPROX_BOUNDS[name]
        measured[name]["within_bound"] = bool(((ulps <= bound_ulps) | (absolute <= bound_abs)).all())
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir, "approx_functions.json").write_text(json.dumps(measured, indent=2) + "\n")
    assert all(found["within_bound"] for found in measured.values()), measured


@ad.kernel(grid=(1,))
def tanh_of(x, y):
    ad.store(y.at[:], ad.tanh(ad.load(x.at[:]), approx=True))


def test_tanh_keeps_subnormals_as_the_interpreter_does():
    # tanh.approx.f32 has no .ftz form: a subnormal argument comes back unchanged (the bound of
    # the test above leaves results below 2^-126 out, so they are compared here bit for bit).
    tiny = np.array([1e-40, -3e-39, 1.4e-45, -1.4e-45, 1.1754942e-38, 2.0 ** -126, 0.0, -0.0], np.float32)
    x = np.resize(tiny, 128).astype(np.float32)
    (gpu,), (cpu,) = gpu_and_interpreter(tanh_of, [x], [np.full_like(x, np.nan)])
    assert gpu.tobytes() == cpu.tobytes() == x.tobytes()


@pytest.mark.parametrize("source, target", [
    (s, t) for s, t in itertools.product(COMPUTE + STORAGE, repeat=2) if s != t
], ids=str)
def test_every_conversion_is_bit_exact(source, target):
    if source in STORAGE:
        raw = np.random.default_rng(4).integers(0, 256 ** source.itemsize, (R, C))
        a = raw.astype(f"u{source.itemsize}").view(source.numpy)
    else:
        a = special_values(source, (R, C), 4)
    (gpu,), (cpu,) = gpu_and_interpreter(convert, [a], [np.zeros((R, C), target.numpy)], LAYOUT="row")
    same = gpu.view(f"u{gpu.itemsize}") == cpu.view(f"u{cpu.itemsize}")
    assert same.all(), _first_difference(gpu, cpu, [a])


@pytest.mark.parametrize("dtype", COMPUTE, ids=str)
@pytest.mark.parametrize("layout", REDUCIBLE)
def test_reductions_follow_the_tree_bit_for_bit(dtype, layout):
    a = special_values(dtype, (R, C), 5)
    if dtype != ad.int32:
        a[np.isnan(a.astype(np.float32))] = 0  # NaN rows would hide the order of the sums
    outs = [np.zeros((3, R), dtype.numpy), np.zeros((3, C), dtype.numpy)]
    gpu, cpu = gpu_and_interpreter(reductions, [a], outs, LAYOUT=layout)
    for g, c, what in zip(gpu, cpu, ("rows", "columns")):
        assert (g.view(f"u{g.itemsize}") == c.view(f"u{c.itemsize}")).all(), (
            what, _first_difference(g, c, [a]))
    (gpu,), (cpu,) = gpu_and_interpreter(broadcast_back, [a], [np.zeros((R, C), dtype.numpy)], LAYOUT=layout)
    assert (gpu.view(f"u{gpu.itemsize}") == cpu.view(f"u{cpu.itemsize}")).all(), _first_difference(
        gpu, cpu, [a])


@pytest.mark.parametrize("source, target", list(itertools.product(LAYOUTS, repeat=2)))
def test_relayouts_and_iota_are_exact(source, target):
    a = np.random.default_rng(6).standard_normal((R, C)).astype(np.float32)
    (gpu,), (cpu,) = gpu_and_interpreter(relayout, [a], [np.zeros_like(a)], SOURCE=source, TARGET=target)
    assert gpu.tobytes() == cpu.tobytes()
    assert np.array_equal(gpu, a + np.arange(C, dtype=np.float32)[None, :])


@pytest.mark.parametrize("source, target", list(itertools.product(LAYOUTS, repeat=2)))
def test_mask_relayouts_are_exact(source, target):
    a = np.random.default_rng(7).standard_normal((R, C)).astype(np.float32)
    (gpu,), (cpu,) = gpu_and_interpreter(mask_relayout, [a], [np.zeros_like(a)], SOURCE=source, TARGET=target)
    assert gpu.tobytes() == cpu.tobytes()
    assert np.array_equal(gpu, np.where(a > 0, a, np.arange(R, dtype=np.float32)[:, None]))


def test_a_register_accumulator_across_a_loop():
    x = np.random.default_rng(8).standard_normal((4, R, C)).astype(ml_dtypes.bfloat16)
    (gpu,), (cpu,) = gpu_and_interpreter(accumulate, [x], [np.zeros((R, C), np.float32)])
    assert gpu.tobytes() == cpu.tobytes()
    wide = x.astype(np.float32)
    expected = (((wide[0] + wide[1]) + wide[2]) + wide[3]) * np.float32(2)
    assert np.array_equal(gpu, expected)


@pytest.mark.parametrize("form", NEGATIONS)
def test_negated_int32_tiles_keep_their_sign_under_min_and_max(form):
    # docs/hardware.md §20: ptxas lost such negations inside a three-input min/max
    x = np.random.default_rng(9).integers(-2**31, 2**31, (64, 64)).astype(np.int32)
    x[0, :3] = [-2**31, 2**31 - 1, 0]
    (gpu,), (cpu,) = gpu_and_interpreter(negated_extremes, [x], [np.zeros_like(x)], FORM=form)
    with np.errstate(over="ignore"):
        negated = (np.int32(0) - x).astype(np.int32)
        assert np.array_equal(cpu, negated + negated.max() - negated.min())
    assert np.array_equal(gpu, cpu)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_masked_gmem_windows_touch_only_what_they_may(dtype):
    x = special_values(as_dtype(dtype), (100, 37), 9)
    y = np.full_like(x, 7.0)
    (gpu,), (cpu,) = gpu_and_interpreter(masked_rows, [x], [y], ROWS=8, COLUMNS=64)
    assert gpu.tobytes() == cpu.tobytes() == masked_rows_reference(x, y).tobytes()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_gmem_windows_inside_the_array_move_in_vectors(layout):
    x = special_values(ad.bfloat16, (65, 128), 10)
    (gpu,), (cpu,) = gpu_and_interpreter(gmem_round_trip, [x], [np.zeros_like(x)], LAYOUT=layout)
    assert gpu.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_whole_row_windows_at_traced_rows_match_the_interpreter(dtype):
    x = special_values(as_dtype(dtype), (40, 1024), 11)
    y = np.full_like(x, 7.0)
    (gpu,), (cpu,) = gpu_and_interpreter(rows_past_the_end, [x], [y], EXTRA=3)
    assert gpu.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("columns", [1000, 1001], ids=["vectors", "elements"])
def test_column_blocks_at_traced_starts_match_the_interpreter(columns):
    x = special_values(ad.bfloat16, (6, columns), 12)
    y = np.full_like(x, 7.0)
    (gpu,), (cpu,) = gpu_and_interpreter(column_blocks, [x], [y], WIDTH=1024)
    assert gpu.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("dtype", COMPUTE, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_whole_tile_totals_match_the_interpreter_bit_for_bit(dtype, layout):
    a = special_values(dtype, (R, C), 15)
    if dtype != ad.int32:
        a[~np.isfinite(a.astype(np.float32))] = 0  # an inf or NaN total would hide the order of the sum
    outs = [np.full(8, 7, dtype.numpy), np.zeros((R, C), dtype.numpy)]
    gpu, cpu = gpu_and_interpreter(whole_tile_totals, [a], outs, LAYOUT=layout)
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes(), _first_difference(g, c, [a])


@pytest.mark.parametrize("shape", [(3, 150), (3, 50), (1, 1), (2, 64)], ids=str)
def test_splats_into_windows_of_any_size_match_numpy_and_the_interpreter(shape):
    y = np.full((7, 300), -1.0, np.float32)
    (gpu,), (cpu,) = gpu_and_interpreter(splat_windows, [], [y], SHAPE=shape)
    assert gpu.tobytes() == cpu.tobytes() == splat_windows_reference(y, shape).tobytes()


@settings(max_examples=60, deadline=None)
@given(shape=st.sampled_from([(1, 1), (3, 50), (4, 33), (2, 300), (3, 150)]), row=st.integers(-5, 9),
       col=st.integers(-320, 320), value=st.floats(-1e6, 1e6, width=32))
def test_a_splat_lands_where_its_window_meets_the_array(shape, row, col, value):
    y = np.full((7, 300), -1.0, np.float32)
    y_gpu = to_device(y)
    splat_at(y_gpu, row, col, value, SHAPE=shape)
    assert to_host(y_gpu).tobytes() == splat_at_reference(y, row, col, value, shape).tobytes()


@pytest.mark.parametrize("shape", [(4, 160), (8, 96), (2, 320), (4, 256)], ids=str)
def test_windows_in_the_row_layout_match_the_interpreter(shape):
    x = special_values(ad.float32, (10, 400), 16)
    (gpu,), (cpu,) = gpu_and_interpreter(window_affine, [x], [np.full_like(x, 7.0)], SHAPE=shape)
    assert gpu.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("shape", [(64, 64), (4, 160), (16, 32), (32, 256)], ids=str)
def test_vectors_broadcast_into_a_matrix_match_the_interpreter(shape):
    x = special_values(ad.float32, shape, 17)
    row, column = special_values(ad.float32, (shape[1],), 18), special_values(ad.float32, (shape[0],), 19)
    (gpu,), (cpu,) = gpu_and_interpreter(add_row_and_column, [x, row, column], [np.full_like(x, 7.0)])
    assert gpu.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("shape", [(4, 256), (64, 64), (16, 32), (1, 128)], ids=str)
def test_real_size_1_dims_stretch_as_in_the_interpreter(shape):
    x, row = special_values(ad.float32, shape, 20), special_values(ad.float32, (2, shape[1]), 21)
    column, one = special_values(ad.float32, (shape[0], 3), 22), np.array([[-0.0]], np.float32)
    gpu, cpu = gpu_and_interpreter(stretch_unit_dims, [x, row, column, one],
                                   [np.full_like(x, 7.0), np.full_like(x, 7.0)])
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes()


def test_a_masked_load_of_one_element_matches_the_interpreter():
    x = np.arange(8, dtype=np.float32)
    (gpu,), (cpu,) = gpu_and_interpreter(masked_element, [x], [np.zeros(2, np.float32)])
    assert gpu.tolist() == cpu.tolist() == [-5.0, 3.0]


def test_per_row_totals_of_a_strided_tile_match_the_interpreter():
    x = special_values(ad.bfloat16, (40, 1024), 13)
    x[np.isnan(x.astype(np.float32))] = 0  # NaN rows would hide the order of the sums
    outs = [np.full(40, 7.0, np.float32), np.full(40, 7.0, np.float32), np.zeros((3, 6), np.float32)]
    gpu, cpu = gpu_and_interpreter(strided_row_totals, [x], outs)
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes()


@pytest.mark.parametrize("through_smem", [False, True])
def test_a_reduction_over_a_unit_axis_matches_the_interpreter(through_smem):
    x = special_values(ad.bfloat16, (1, 2048), 22)
    gpu, cpu = gpu_and_interpreter(unit_axis_peaks, [x], [np.zeros((1, 2048), np.float32)],
                                   THROUGH_SMEM=through_smem)
    assert gpu[0].tobytes() == cpu[0].tobytes()


@pytest.mark.parametrize("through_smem", [False, True])
def test_tiles_smaller_than_the_warpgroup_match_the_interpreter(through_smem):
    x = np.random.default_rng(30).standard_normal((4, 8)).astype(np.float32) * 1000
    outs = [np.full(4, np.nan, np.float32), np.full((4, 8), np.nan, np.float32)]
    gpu, cpu = gpu_and_interpreter(small_tiles, [x], outs, THROUGH_SMEM=through_smem)
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes(), _first_difference(g, c, [x])


def test_unsigned_tiles_and_bool_arrays_match_numpy_and_the_interpreter():
    rng = np.random.default_rng(32)
    x, keep = rng.integers(0, 256, (8, 128)).astype(np.uint8), rng.random((8, 128)) < 0.5
    outs = [np.full((8, 128), np.nan, np.float32), np.zeros((2, 8, 128), np.uint16)]
    gpu, cpu = gpu_and_interpreter(unsigned_storage, [x, keep], outs)
    for g, c, wanted in zip(gpu, cpu, unsigned_storage_reference(x, keep)):
        assert g.tobytes() == c.tobytes() == wanted.tobytes()


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int32], ids=str)
@pytest.mark.parametrize("layout", ["wgmma", "row"])
def test_argmax_argmin_and_mean_match_the_interpreter(dtype, layout):
    x = special_values(dtype, (R, C), 33)
    if dtype != ad.int32:
        x[np.isinf(x.astype(np.float32))] = 0  # inf - inf in a sum is a NaN: it would hide the order
    outs = [np.full(R, -1, np.int32), np.full(C, -1, np.int32), np.zeros(R + C + 1, dtype.numpy)]
    gpu, cpu = gpu_and_interpreter(arg_extrema, [x], outs, LAYOUT=layout)
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes(), _first_difference(g, c, [x])


@pytest.mark.parametrize("shape", [(128, 4), (128, 8), (256, 4), (32, 4), (16, 16), (8, 128)], ids=str)
def test_vectors_broadcast_over_narrow_rows_match_the_interpreter(shape):
    scale, x = special_values(ad.float32, shape[:1], 34), special_values(ad.float32, shape, 35)
    x[~np.isfinite(x)] = 0  # an inf or NaN would hide the order of the first row's sum
    outs = [np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32)]
    gpu, cpu = gpu_and_interpreter(scaled_rows, [scale, x], outs)
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes(), _first_difference(g, c, [scale, x])


def test_numpy_spellings_match_the_interpreter():
    x = special_values(ad.float32, (8, 128), 36)
    x[~np.isfinite(x)] = 0  # an inf or NaN would hide the order of the sums
    outs = [np.zeros((2, 8, 128), np.float32), np.zeros((3, 8), np.int32), np.full((8, 128), 9.0, np.float32)]
    gpu, cpu = gpu_and_interpreter(numpy_idioms, [x], outs)
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes(), _first_difference(g, c, [x])


def test_zero_d_registers_across_a_loop_match_the_interpreter():
    x = special_values(ad.float32, (8, 256), 37)
    x[~np.isfinite(x)] = 0  # an inf or NaN total would hide the order of the sums
    (gpu,), (cpu,) = gpu_and_interpreter(running_total, [x], [np.full(2, np.nan, np.float32)])
    assert gpu.tobytes() == cpu.tobytes(), _first_difference(gpu, cpu, [x])


def test_a_reduction_of_a_reduction_matches_the_interpreter():
    x = special_values(ad.float32, (4, 8, 32), 31)
    x[~np.isfinite(x)] = 0  # an inf or NaN total would hide the order of the sums
    outs = [np.full(4, np.nan, np.float32), np.full((4, 8, 32), np.nan, np.float32)]
    gpu, cpu = gpu_and_interpreter(nested_totals, [x], outs)
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes(), _first_difference(g, c, [x])


def test_row_maxima_of_strided_halves_met_in_shared_memory_match_the_interpreter():
    x = special_values(ad.bfloat16, (24, 2048), 21)
    outs = [np.full(24, 7.0, np.float32), np.zeros_like(x)]
    gpu, cpu = gpu_and_interpreter(split_row_peaks, [x], outs)
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes()


@pytest.mark.parametrize("columns", [1000, 1001])
def test_8_bit_tiles_in_2_element_vectors_match_the_interpreter(columns):
    x = np.random.default_rng(14).integers(-128, 127, (5, columns)).astype(np.int8)
    (gpu,), (cpu,) = gpu_and_interpreter(byte_pairs, [x], [np.full_like(x, -7)])
    assert gpu.tobytes() == cpu.tobytes()


def test_a_traced_index_on_the_left_of_int32_tiles_is_bit_exact():
    a = special_values(ad.int32, (R, C), 8)
    (gpu,), (cpu,) = gpu_and_interpreter(index_on_the_left, [a], [np.zeros((2, 6, R // 2, C), np.int32)])
    assert np.array_equal(gpu, cpu)


def test_traced_scalars_with_tiles_are_bit_exact():
    x = (np.random.default_rng(9).standard_normal((64, 128)) + 3).astype(np.float32)
    x[0, :3] = 3.0
    on_gpu = [to_device(x), to_device(np.zeros((2, 6, 64, 128), np.float32))]
    traced_scalars_with_tiles(*on_gpu, 1.5)
    interpreted = np.zeros((2, 6, 64, 128), np.float32)
    traced_scalars_with_tiles.interpret(x, interpreted, 1.5)
    assert to_host(on_gpu[1]).tobytes() == interpreted.tobytes()


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int32, ad.int8, ad.float8_e4m3fn], ids=str)
def test_gathers_are_bit_exact_and_read_nothing_outside_the_table(dtype):
    # Indices past both ends of the table (and the int32 extremes) must read nothing there:
    # memcheck on this test is the check of that on the GPU.
    table, ids, picks = gather_inputs(dtype, 5)
    outs = [np.zeros((2, 64, 128), dtype.numpy), np.zeros((2, 2, 128), dtype.numpy)]
    gpu, cpu = gpu_and_interpreter(gathers, [table, ids, picks], outs)
    for g, c in zip(gpu, cpu):
        assert g.tobytes() == c.tobytes(), _first_difference(g, c, [table])


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int8, ad.float8_e4m3fn], ids=str)
def test_gathers_of_whole_rows_move_vectors_bit_exact_and_nothing_outside(dtype):
    table, ids = row_gather_inputs(dtype, 64, 7)
    (gpu,), (cpu,) = gpu_and_interpreter(row_gathers, [table, ids], [np.zeros((64, 128), dtype.numpy)])
    assert gpu.tobytes() == cpu.tobytes(), _first_difference(gpu, cpu, [table])


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int32], ids=str)
def test_scatters_are_bit_exact_and_write_nothing_outside_the_array(dtype):
    ids, src, out = scatter_inputs(dtype, 6)
    (gpu,), (cpu,) = gpu_and_interpreter(scatters, [ids, src], [out])
    assert gpu.tobytes() == cpu.tobytes(), _first_difference(gpu, cpu, [src])
