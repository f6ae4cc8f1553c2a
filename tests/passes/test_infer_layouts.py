"""infer-layouts: which register layout every tile gets, and the errors when layouts clash."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples, line_of
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.dialects.layout_attrs import layout_of
from asyncdsl.hw.fragments import WGMMA_ROW, SplatLayout, StridedLayout, TiledLayout, replicated_layout
from asyncdsl.hw.layout_choice import narrow_row_layout, row_layout
from asyncdsl.passes.pipeline import make_context

F32 = ad.ArraySpec((64, 256), ad.float32)
BF16 = ad.ArraySpec((64, 256), ad.bfloat16)


def _layouts(kernel, *args, **kwargs) -> dict[str, list]:
    """The layout recorded on each op, by op name, in program order."""
    text = kernel.ir(*args, after="infer-layouts", **kwargs)
    module = Parser(make_context(), text).parse_module()
    found: dict[str, list] = {}
    for op in module.walk():
        for result in op.results:
            layout = layout_of(result)
            if layout is not None:
                found.setdefault(op.name, []).append(layout)
    return found


@ad.kernel(grid=(1,))
def row_softmax(x, y):
    buf = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :], buf, barrier=bar)
    bar.wait()
    t = buf[...].astype(ad.float32)
    e = ad.exp2(t - t.max(axis=1)[:, None])
    buf[...] = (e / e.sum(axis=1)[:, None]).astype(x.dtype)
    ad.fence_async_smem()
    ad.async_copy(buf, y.at[:, :])
    ad.await_async_copy(0)


def test_a_tile_reduced_over_rows_gets_the_row_layout_and_its_broadcasts_cost_nothing():
    found = _layouts(row_softmax, BF16, BF16)
    expected = row_layout((64, 256), 2)
    assert found["asyncdsl.load_smem"] == [expected]
    assert all(layout == expected
               for layout in found["arith.subf"] + found["arith.divf"] + found["asyncdsl.convert"])
    reduced = expected.reduce((64, 256), 1)
    assert found["asyncdsl.reduce"] == [reduced, reduced]
    assert found["asyncdsl.broadcast_in_dim"] == [expected, expected]


@ad.kernel(grid=(1,))
def scale(x, y):
    buf = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :], buf, barrier=bar)
    bar.wait()
    buf[...] = buf[...] * 2.0 + 1.0
    ad.fence_async_smem()
    ad.async_copy(buf, y.at[:, :])
    ad.await_async_copy(0)


@pytest.mark.parametrize("dtype, vector", [(ad.float32, 4), (ad.bfloat16, 8), (ad.float16, 8)])
def test_an_elementwise_tile_is_strided_with_16_byte_vectors_and_constants_stay_splats(dtype, vector):
    found = _layouts(scale, ad.ArraySpec((64, 256), dtype), ad.ArraySpec((64, 256), dtype))
    assert found["asyncdsl.load_smem"] == [StridedLayout(vector)]
    assert found["asyncdsl.full"] == [SplatLayout(), SplatLayout()]
    assert found["arith.mulf"] == found["arith.addf"] == [StridedLayout(vector)]


@ad.kernel(grid=lambda x, y: (x.shape[0] // 2,))
def gmem_row_sums(x, y):
    rows = ad.ds(ad.program_id(0) * 2, 2)
    t = ad.load(x.at[rows, ad.ds(0, 1024)]).astype(ad.float32)
    ad.store(y.at[rows, ad.ds(0, 1024)], (t - t.max(axis=1)[:, None]).astype(y.dtype))


@pytest.mark.parametrize("columns, vector", [(1024, 8), (1000, 8), (1004, 4), (1002, 2), (12345, 1)])
def test_gmem_rows_that_start_off_a_vector_boundary_get_narrower_vectors(columns, vector):
    # Rows of 1002 bf16 start every 2 elements at best: wider vectors could never move whole, and
    # with one element a lane a warp's element-by-element accesses lie side by side.
    spec = ad.ArraySpec((64, columns), ad.bfloat16)
    found = _layouts(gmem_row_sums, spec, spec)
    assert found["asyncdsl.load_gmem"] == [row_layout((2, 1024), 16 / vector)]
    assert found["asyncdsl.load_gmem"][0].vector_length == vector


@settings(max_examples=examples(30), deadline=None)
@given(columns=st.integers(1, 20000), dtype=st.sampled_from([ad.bfloat16, ad.float32, ad.float8_e4m3fn]))
def test_an_inferred_gmem_vector_always_divides_the_rows_and_is_as_wide_as_they_allow(columns, dtype):
    spec = ad.ArraySpec((4, columns), dtype)
    (layout,) = _layouts(gmem_row_sums, spec, ad.ArraySpec((4, columns), ad.bfloat16))["asyncdsl.load_gmem"]
    widest = 16 // min(dtype.itemsize, 2)  # 16 bytes of the class's narrowest element (the bf16 store's)
    assert columns % layout.vector_length == 0
    assert layout.vector_length == min(widest, columns & -columns)


@ad.kernel(grid=(1,))
def given_wgmma(x, y):
    buf = ad.smem(x.shape, x.dtype)
    rows = ad.smem((x.shape[0],), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :], buf, barrier=bar)
    bar.wait()
    t = ad.load(buf, layout=ad.WGMMA)
    rows[...] = (t * 3.0).sum(axis=1)
    ad.fence_async_smem()
    ad.async_copy(rows, y.at[:])
    ad.await_async_copy(0)


def test_a_given_layout_flows_through_elementwise_ops_and_reduces_to_its_row_layout():
    found = _layouts(given_wgmma, F32, ad.ArraySpec((64,), ad.float32))
    assert found["arith.mulf"] == [ad.WGMMA]
    assert found["asyncdsl.reduce"] == [WGMMA_ROW]


@ad.kernel(grid=(1,))
def clashing(x, y):
    a = ad.smem(x.shape, x.dtype)
    b = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :], a, barrier=bar)
    bar.wait()
    first = ad.load(a, layout=ad.WGMMA)
    second = ad.load(a, layout=ad.strided(4))
    b[...] = first + second
    ad.fence_async_smem()
    ad.async_copy(b, y.at[:, :])
    ad.await_async_copy(0)


def test_two_given_layouts_meeting_in_math_are_an_error_naming_both_lines():
    with pytest.raises(ad.LayoutError) as caught:
        clashing.compile(F32, F32)
    error = caught.value
    assert "wgmma" in error.message and "strided(4)" in error.message and "to_layout" in error.message
    assert str(line_of(clashing, "layout=ad.WGMMA")) in error.message
    assert error.location.line == line_of(clashing, "layout=ad.strided(4)")


@ad.kernel(grid=(1,))
def reduce_strided(x, y):
    a = ad.smem(x.shape, x.dtype)
    rows = ad.smem((x.shape[0],), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :], a, barrier=bar)
    bar.wait()
    rows[...] = ad.load(a, layout=ad.strided(4)).sum(axis=1)
    ad.fence_async_smem()
    ad.async_copy(rows, y.at[:])
    ad.await_async_copy(0)


def test_a_layout_that_cannot_reduce_one_axis_is_an_error_at_the_reduction():
    with pytest.raises(ad.LayoutError) as caught:
        reduce_strided.compile(F32, ad.ArraySpec((64,), ad.float32))
    assert caught.value.location.line == line_of(reduce_strided, ".sum(axis=1)")
    assert "relayout" in caught.value.message


@ad.kernel(grid=(1,))
def small_tile_totals(x, totals, centred):
    """The total and the smallest element of a tile too narrow for the row layout and too short
    for WGMMA ((16, 16): 16 lanes' worth of columns), and the tile less its smallest element."""
    t = ad.load(x.at[:, :])
    ad.store(totals.at[ad.ds(0, 1)], t.sum())
    ad.store(totals.at[ad.ds(1, 1)], t.min())
    ad.store(centred.at[:, :], t - t.min())


def test_a_tile_only_reduced_whole_takes_the_strided_layout_where_no_other_holds_it(ptxas):
    x = np.random.default_rng(5).integers(-100, 100, (16, 16)).astype(np.float32)
    totals, centred = np.full(2, np.nan, np.float32), np.zeros_like(x)
    assert _layouts(small_tile_totals, x, totals, centred)["asyncdsl.load_gmem"] == [StridedLayout(2)]
    small_tile_totals.interpret(x, totals, centred)
    assert totals.tolist() == [x.sum(), x.min()] and np.array_equal(centred, x - x.min())
    ptxas(small_tile_totals.ptx(x, totals, centred))


@ad.kernel(grid=(1,))
def short_row_sums(x, y):
    ad.store(y.at[:], ad.load(x.at[:, :]).sum(axis=1))


def test_a_row_reduction_no_picked_layout_holds_is_an_error_saying_what_would():
    with pytest.raises(ad.LayoutError) as caught:  # rows of 5 vectors of 4 (or 10 of 2, 20 of 1)
        short_row_sums.compile(ad.ArraySpec((12, 20), ad.float32), ad.ArraySpec((12,), ad.float32))
    message = caught.value.message
    assert "rows of a multiple of 32 elements" in message and "(it has 12 rows of 20)" in message
    assert "(64·m, 8·n)" in message and "1, 2, 4, ... 32 vectors" in message
    assert "total" not in message  # the tile is reduced along its rows only
    assert caught.value.location.line == line_of(short_row_sums, ".sum(axis=1)")
    # Rows of 32 elements are what the message asks for: they compile.
    short_row_sums.compile(ad.ArraySpec((12, 32), ad.float32), ad.ArraySpec((12,), ad.float32))


@pytest.mark.parametrize("shape", [(16, 16), (8, 16), (32, 4), (48, 8)], ids=str)
def test_rows_shorter_than_32_vectors_reduce_over_a_few_lanes_each(shape, ptxas):
    x = np.random.default_rng(6).integers(-100, 100, shape).astype(np.float32)
    y = np.full(shape[0], np.nan, np.float32)
    assert _layouts(short_row_sums, x, y)["asyncdsl.load_gmem"] == [narrow_row_layout(shape, 4)]
    short_row_sums.interpret(x, y)
    assert np.array_equal(y, x.sum(axis=1))
    ptxas(short_row_sums.ptx(x, y))


@ad.kernel(grid=(1,))
def too_small(x, y):
    a = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :], a, barrier=bar)
    bar.wait()
    a[...] = a[...] + 1.0
    ad.fence_async_smem()
    ad.async_copy(a, y.at[:, :])
    ad.await_async_copy(0)


def test_a_tile_the_warpgroup_cannot_share_evenly_is_an_error_at_its_line():
    odd = ad.ArraySpec((12, 20), ad.float32)  # 240 elements: too many for every thread to hold
    with pytest.raises(ad.LayoutError) as caught:
        too_small.compile(odd, odd)
    assert "not a multiple of the warpgroup's 128 threads" in caught.value.message
    assert "at most 64, which every thread then holds whole" in caught.value.message
    assert caught.value.location.line == line_of(too_small, "a[...] = a[...] + 1.0")


def test_a_tile_of_at_most_64_elements_is_held_whole_by_every_thread(ptxas):
    x = np.random.default_rng(3).integers(-100, 100, (4, 8)).astype(np.float32)
    y = np.full_like(x, np.nan)
    layouts = _layouts(too_small, x, y)
    assert set(layouts["asyncdsl.load_smem"]) == {replicated_layout((4, 8))}
    too_small.interpret(x, y)
    assert np.array_equal(y, x + 1)
    ptxas(too_small.ptx(x, y))


@ad.kernel(grid=(1,))
def totals_of_totals(x, y):
    ad.store(y.at[:], ad.load(x.at[:, :, :]).sum(axis=2).sum(axis=1))


def test_reducing_every_dim_a_reduction_left_tiled_leaves_the_leading_dims_in_every_thread(ptxas):
    x = np.random.default_rng(4).integers(-100, 100, (4, 8, 32)).astype(np.float32)
    y = np.full(4, np.nan, np.float32)
    assert _layouts(totals_of_totals, x, y)["asyncdsl.reduce"][1] == replicated_layout((4,))
    totals_of_totals.interpret(x, y)
    assert np.array_equal(y, x.sum(axis=(1, 2)))
    ptxas(totals_of_totals.ptx(x, y))


@ad.kernel(grid=(1,))
def accumulate_rows(x, y):
    stages = ad.smem(x.shape, x.dtype)
    out = ad.smem(y.shape, y.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :, :], stages, barrier=bar)
    bar.wait()
    acc = ad.registers(y.shape, ad.float32)
    acc[...] = ad.zeros(y.shape, ad.float32)
    for k in ad.range(x.shape[0]):
        acc[...] = acc[...] + stages.at[k][...].astype(ad.float32)
    out[...] = acc[...].max(axis=1)[:, None] + acc[...]
    ad.fence_async_smem()
    ad.async_copy(out, y.at[:, :])
    ad.await_async_copy(0)


def test_a_register_ref_shares_the_layout_of_what_is_read_from_it_and_written_to_it():
    found = _layouts(accumulate_rows, ad.ArraySpec((2, 64, 256), ad.bfloat16), F32)
    expected = row_layout((64, 256), 2)  # reduced after the loop; 16-byte vectors of the bf16 loads
    assert found["asyncdsl.alloc_registers"] == [expected]
    assert set(found["asyncdsl.read_registers"]) == {expected}
    assert found["asyncdsl.load_smem"] == [expected]


def test_row_layout_keeps_a_warps_row_in_one_line_of_vectors():
    layout = row_layout((64, 256), 2)
    assert isinstance(layout, TiledLayout) and layout.vector_length == 8
    coordinates = layout.coordinates((64, 256))  # (128, *registers, 8, 2)
    lane0, lane1 = coordinates[0].reshape(-1, 2), coordinates[1].reshape(-1, 2)
    assert (lane0[:8] == [[0, c] for c in range(8)]).all()
    assert (lane1[:8] == [[0, 8 + c] for c in range(8)]).all()
    assert row_layout((64, 20), 4) is None


def test_the_pass_records_a_layout_on_every_op_that_makes_a_tile():
    module = Parser(make_context(), row_softmax.ir(BF16, BF16, after="infer-layouts")).parse_module()
    tiles = [r for op in module.walk() for r in op.results if "vector" in str(r.type)]
    assert tiles and all(layout_of(r) is not None for r in tiles)
