"""Register tiles to and from GMEM windows, and gathers by computed index: elements outside the
array or masked off are never touched, against numpy; misuse is a TraceError at the line."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples, line_of
from tile_kernels import (
    LAYOUTS,
    gather_inputs,
    gathers,
    gathers_reference,
    gmem_round_trip,
    masked_rows,
    masked_rows_reference,
    scatter_inputs,
    scatters,
    scatters_reference,
    stretch_unit_dims,
    stretch_unit_dims_reference,
)

import asyncdsl as ad


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("shape", [(100, 37), (8, 64), (13, 5)])
def test_masked_windows_touch_only_elements_inside_the_array_and_the_mask(dtype, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    before = np.full_like(x, 7.0)
    y = before.copy()
    masked_rows.interpret(x, y, ROWS=8, COLUMNS=64)
    assert y.tobytes() == masked_rows_reference(x, before).tobytes()


def test_a_load_outside_the_array_gives_other():
    @ad.kernel(grid=(1,))
    def shifted(x, y):
        t = ad.load(x.at[ad.ds(ad.program_id(0) - 2, 4), ad.ds(-3, 128)], other=5.0)
        ad.store(y.at[:, :], t)

    x = np.arange(4 * 125, dtype=np.float32).reshape(4, 125)
    y = np.zeros((4, 128), np.float32)
    shifted.interpret(x, y)
    expected = np.full((4, 128), 5.0, np.float32)
    expected[2:, 3:] = x[:2, :]
    assert np.array_equal(y, expected)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32])
def test_windows_inside_the_array_round_trip_in_every_layout(layout, dtype):
    x = (np.random.default_rng(2).standard_normal((65, 128)) * 100).astype(dtype)
    y = np.zeros_like(x)
    gmem_round_trip.interpret(x, y, LAYOUT=layout)
    expected = (x * dtype(2)).astype(dtype)
    expected[0] = x[0]
    assert y.tobytes() == expected.tobytes()


@settings(max_examples=examples(25), deadline=None)
@given(
    shape=st.sampled_from([(1, 128), (2, 128), (3, 128), (4, 256), (8, 64), (16, 32), (64, 64), (32, 512)]),
    dtype=st.sampled_from([np.float32, np.int32]), seed=st.integers(0, 2**16))
def test_stretching_size_1_dims_is_numpys_broadcasting(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x, row, column, one = (rng.integers(-1000, 1000, s).astype(dtype) if dtype is np.int32
                           else rng.standard_normal(s).astype(dtype)
                           for s in (shape, (2, shape[1]), (shape[0], 3), (1, 1)))
    y, z = np.zeros_like(x), np.zeros_like(x)
    stretch_unit_dims.interpret(x, row, column, one, y, z)
    expected_y, expected_z = stretch_unit_dims_reference(x, row, column, one)
    assert np.array_equal(y, expected_y) and np.array_equal(z, expected_z)


def test_misuse_is_an_error_at_the_line():
    @ad.kernel(grid=(1,))
    def bad_mask(x, y):
        t = ad.load(x.at[:, :])
        ad.store(y.at[:, :], t, mask=t)  # not a bool tile

    @ad.kernel(grid=(1,))
    def bad_value(x, y):
        ad.store(y.at[:, :], ad.zeros((64, 64), ad.float32))  # not the window's shape

    @ad.kernel(grid=(1,))
    def smem_mask(x, y):
        buf = ad.smem((64, 128), x.dtype)
        ad.load(buf, mask=ad.load(x.at[:, :]) > 0)

    spec = ad.ArraySpec((64, 128), ad.float32)
    for kernel, text, fragment in ((bad_mask, "mask=t", "bool tile"),
                                   (bad_value, "ad.zeros((64, 64)", r"\(64, 128\) float32"),
                                   (smem_mask, "ad.load(buf, mask=", "mask is for GMEM windows")):
        with pytest.raises(ad.TraceError, match=fragment) as caught:
            kernel.compile(spec, spec)
        assert caught.value.location.line == line_of(kernel, text)


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int32, ad.int8, ad.float8_e4m3fn], ids=str)
def test_gathers_read_the_elements_their_indices_name_and_nothing_outside(dtype):
    table, ids, picks = gather_inputs(dtype, 3)
    rows_out, picked = np.zeros((2, 64, 128), dtype.numpy), np.zeros((2, 2, 128), dtype.numpy)
    gathers.interpret(table, ids, picks, rows_out, picked)
    unsigned = f"u{np.dtype(dtype.numpy).itemsize}"
    for got, expected in zip((rows_out, picked), gathers_reference(table, ids, picks)):
        assert np.array_equal(got.view(unsigned), expected.view(unsigned))


def test_gather_misuse_is_an_error_at_the_line():
    @ad.kernel(grid=(1,))
    def sliced(x, y):
        ad.load(x.at[ad.iota((64,), ad.int32, dim=0), :])

    @ad.kernel(grid=(1,))
    def float_index(x, y):
        ad.load(x.at[ad.iota((64, 128), ad.int32, dim=0).astype(ad.float32), 0])

    @ad.kernel(grid=(1,))
    def unbroadcastable(x, y):
        ad.load(x.at[ad.iota((64,), ad.int32, dim=0), ad.iota((32,), ad.int32, dim=0)])

    @ad.kernel(grid=(1,))
    def wrong_mask(x, y):
        k = ad.iota((64,), ad.int32, dim=0)
        ad.load(x.at[k, k], mask=ad.iota((32,), ad.int32, dim=0) > 3)

    @ad.kernel(grid=(1,))
    def copied(x, y):
        buf = ad.smem((64,), ad.float32)
        ad.async_copy(x.at[ad.iota((64,), ad.int32, dim=0), 0], buf, barrier=ad.barrier())

    spec = ad.ArraySpec((64, 128), ad.float32)
    for kernel, text, fragment in (
        (copied, "ad.async_copy(x.at[", "asyncdsl.load and asyncdsl.store move"),
        (sliced, "ad.load(x.at[ad.iota((64,)", "got 2 indices|slice"),
        (float_index, "astype(ad.float32), 0]", "must hold int32, not float32"),
        (unbroadcastable, "ad.iota((32,), ad.int32, dim=0)])", "do not broadcast"),
        (wrong_mask, "mask=ad.iota((32,)", r"mask must be a bool tile of the window's shape \(64,\)"),
    ):
        with pytest.raises(ad.TraceError, match=fragment) as caught:
            kernel.compile(spec, spec)
        assert caught.value.location.line == line_of(kernel, text), kernel.name


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int32], ids=str)
def test_scatters_write_the_elements_their_indices_name_and_nothing_outside(dtype):
    ids, src, out = scatter_inputs(dtype, 4)
    expected = scatters_reference(ids, src, out)
    scatters.interpret(ids, src, out)
    unsigned = f"u{np.dtype(dtype.numpy).itemsize}"
    assert np.array_equal(out.view(unsigned), expected.view(unsigned))


def test_two_elements_of_a_scatter_on_one_array_element_are_an_error_at_the_store():
    ids, src, out = scatter_inputs(ad.float32, 4)
    ids[1, 40] = ids[1, 41]  # the same row twice: every unmasked column written twice
    with pytest.raises(ad.InterpretError,
                       match="two elements of a scatter write the same array element") as caught:
        scatters.interpret(ids, src, out)
    assert caught.value.location.line == line_of(scatters, "ad.store(out.at[i[:, None], columns]")
    ids[1, 41] = -5  # masked off or outside the array, a repeated index writes nothing: no error
    scatters.interpret(ids, src, out)
