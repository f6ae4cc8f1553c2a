"""The cp.async fallback (`implementation="cp_async"`): its plan (chunks, rows, tiles), IR and PTX
(through ptxas), the interpreter against numpy, the swizzled variant byte for byte against a TMA
load with the same transforms and swizzle, completion on a barrier or in commit groups, and the
interpreter's diagnostics.  Compile-time errors are in test_bulk_cp_async_errors.py."""

from __future__ import annotations

import re

import numpy as np
import pytest
from bulk_cp_async_kernels import (
    CP_ASYNC_WINDOWS,
    SWIZZLED_CASES,
    cp_async_window,
    expected_swizzled_rows,
    swizzled_rows,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples, poisoned, random_bits, raw
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.hw.cp_async import CpAsyncPlan, plan_cp_async_copy
from asyncdsl.hw.swizzle import swizzled
from asyncdsl.interpret import tma
from asyncdsl.passes.pipeline import ir_text, make_context

RNG = np.random.default_rng(9)
F32, BF16 = ad.float32, ad.bfloat16
WINDOW_IDS = [f"chunk{c[3]}-width{c[1][2]}" for c in CP_ASYNC_WINDOWS]
SWIZZLE_IDS = [f"swizzle{s}-{'tiled' if t else 'rows'}" for s, t, _, _ in SWIZZLED_CASES]


def window_specs(x_shape, y_shape):
    return ad.ArraySpec(x_shape, F32), ad.ArraySpec(y_shape, F32)


# -- the plan -----------------------------------------------------------------------------------


@pytest.mark.parametrize("x_shape, y_shape, col, chunk", CP_ASYNC_WINDOWS, ids=WINDOW_IDS)
def test_the_widest_chunk_the_alignment_allows(x_shape, y_shape, col, chunk):
    rows, cols = y_shape[1:]
    plan = plan_cp_async_copy(x_shape, F32, ["traced", col], (rows, cols), (), 0, (rows, cols))
    assert plan.chunk_bytes == chunk
    assert (plan.rows, plan.row_bytes, plan.row_stride_bytes) == (
        (1, rows * cols * 4, rows * cols * 4) if cols == x_shape[1] else (rows, cols * 4, x_shape[1] * 4)
    )


def test_rows_merge_where_the_window_is_contiguous():
    # (2, 3, 4) window of a (4, 3, 8) array: rows of 4 elements, 8 apart across both outer dims.
    plan = plan_cp_async_copy((4, 3, 8), F32, [1, 0, 4], (2, 3, 4), (), 0, (2, 3, 4))
    assert (plan.rows, plan.row_bytes, plan.row_stride_bytes, plan.chunk_bytes) == (6, 16, 32, 16)
    # A squeezed dim contributes only to the offset.
    plan = plan_cp_async_copy((4, 3, 8), F32, [2, 1, 0], (-1, -1, 8), (), 0, (8,))
    assert (plan.rows, plan.row_bytes) == (1, 32)


@settings(max_examples=examples(60), deadline=None)
@given(
    rows=st.sampled_from([8, 16, 24]),
    col_tiles=st.integers(1, 3),
    swizzle=st.sampled_from([0, 32, 64, 128]),
    phase=st.sampled_from([0, 128, 256, 384, 512, 896]),
)
def test_tiled_chunks_land_where_a_tma_load_puts_them(rows, col_tiles, swizzle, phase):
    tile_cols = (swizzle or 64) // 2
    shape = (rows, tile_cols * col_tiles)
    plan = plan_cp_async_copy(
        (64, shape[1]), BF16, [0, 0], shape, (ad.TileTransform((8, tile_cols)),), swizzle,
        (rows // 8, col_tiles, 8, tile_cols),
    )
    gmem, smem = plan.chunk_offsets()
    chunk_bytes = np.arange(plan.chunk_bytes)
    source = (gmem[:, None] + chunk_bytes).reshape(-1)
    target = swizzled(phase + (smem[:, None] + chunk_bytes).reshape(-1), swizzle) - phase
    # TMA: the tiled box, its rows (of one tile row each) padded to the swizzle span.
    box_shape = (rows // 8 * col_tiles * 8, tile_cols * 2)
    tma_bytes = tma.smem_byte_offsets(box_shape, 1, swizzle, phase).reshape(rows // 8, col_tiles, 8, -1)
    element = np.arange(rows * shape[1] * 2).reshape(rows // 8, 8, col_tiles, tile_cols * 2)
    gmem_of_tma = element.transpose(0, 2, 1, 3)  # the tile transform, on byte offsets of the slice
    landed = dict(zip(target.tolist(), source.tolist()))
    for where, what in zip(tma_bytes.reshape(-1).tolist(), gmem_of_tma.reshape(-1).tolist()):
        row, byte = divmod(what, shape[1] * 2)
        assert landed[where] == row * plan.row_stride_bytes + byte


def test_chunk_offsets_of_a_plain_copy_are_dense():
    plan = CpAsyncPlan(rows=4, row_bytes=32, row_stride_bytes=200, tile_rows=4, tile_row_bytes=32,
                       swizzle_bytes=0, chunk_bytes=8)
    gmem, smem = plan.chunk_offsets()
    assert smem.tolist() == list(range(0, 128, 8))
    assert gmem.tolist() == [r * 200 + b for r in range(4) for b in range(0, 32, 8)]


# -- IR and PTX ---------------------------------------------------------------------------------


@pytest.mark.parametrize("barrier", [True, False])
def test_resolved_op_round_trips(barrier):
    x, y = window_specs((64, 50), (4, 16, 8))
    text = cp_async_window.ir(x, y, COL=2, TRACED=True, BARRIER=barrier, after="allocate-smem")
    assert '"asyncdsl.cp_async_load"' in text
    assert "chunk_bytes = 8" in text and "row_stride_bytes = 200" in text
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    assert ir_text(parsed) == text


@pytest.mark.parametrize("barrier", [True, False])
@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize("x_shape, y_shape, col, chunk", CP_ASYNC_WINDOWS, ids=WINDOW_IDS)
def test_windows_assemble(x_shape, y_shape, col, chunk, traced, barrier, ptxas):
    ptx = cp_async_window.ptx(*window_specs(x_shape, y_shape), COL=col, TRACED=traced, BARRIER=barrier)
    ptxas(ptx)
    cache = "cg" if chunk == 16 else "ca"
    assert re.search(rf"cp\.async\.{cache}\.shared\.global \[%r\d+\], \[%rd\d+\], {chunk};", ptx)
    # A thread's chunk -> (row, byte) by constants: shifts and masks, or multiply-highs.
    assert "div." not in ptx and "rem." not in ptx


def test_barrier_completion_keeps_the_arrival_count():
    x, y = window_specs((64, 50), (4, 16, 8))
    ptx = cp_async_window.ptx(x, y, COL=2, TRACED=False, BARRIER=True)
    # Every thread's copies are tracked without .noinc (no net change of the pending count)...
    assert re.search(r"\n    cp\.async\.mbarrier\.arrive\.shared::cta\.b64 \[%r\d+\];", ptx)
    assert ".noinc" not in ptx
    # ...the barrier is initialised with the user's count, and the leader arrives once.
    assert re.search(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\+0\], 1;", ptx)
    leader_arrives = r"@%p\d+ mbarrier\.arrive\.release\.cta\.shared::cta\.b64 _, \[%r\d+\];"
    assert re.search(r"bar\.sync %r\d+, 128;\n    " + leader_arrives, ptx)
    assert "cp.async.commit_group" not in ptx and "cp.async.wait_all;" in ptx


def test_commit_group_completion():
    x, y = window_specs((64, 50), (4, 16, 8))
    ptx = cp_async_window.ptx(x, y, COL=2, TRACED=False, BARRIER=False)
    assert "\n    cp.async.commit_group;\n" in ptx and "\n    cp.async.wait_group 0;\n" in ptx
    assert "cp.async.mbarrier" not in ptx


@pytest.mark.parametrize("swizzle, tiled, x_shape, y_shape", SWIZZLED_CASES, ids=SWIZZLE_IDS)
def test_swizzled_copies_assemble(swizzle, tiled, x_shape, y_shape, ptxas):
    specs = (ad.ArraySpec(x_shape, BF16), ad.ArraySpec(y_shape, BF16))
    ptx = swizzled_rows.ptx(*specs, SWIZZLE=swizzle, TILED=tiled, BARRIER=False, ENGINE="cp_async")
    ptxas(ptx)
    assert re.search(rf"and\.b32 (%r\d+), \1, {swizzle // 16 - 1};\n    shl\.b32 \1, \1, 4;", ptx)
    assert "div." not in ptx and "rem." not in ptx


def test_swizzled_buffers_are_aligned_to_the_swizzle_repeat():
    specs = (ad.ArraySpec((32, 128), BF16), ad.ArraySpec((2, 2, 2, 8, 64), BF16))
    constexprs = dict(SWIZZLE=128, TILED=True, BARRIER=False, ENGINE="cp_async")
    ir = swizzled_rows.ir(*specs, **constexprs, after="allocate-smem")
    assert re.search(r"asyncdsl.alloc_smem align 128 offset 0 :", ir)


# -- the interpreter against numpy --------------------------------------------------------------


@pytest.mark.parametrize("barrier", [True, False])
@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize("x_shape, y_shape, col, chunk", CP_ASYNC_WINDOWS, ids=WINDOW_IDS)
def test_windows_move_bit_exactly(x_shape, y_shape, col, chunk, traced, barrier):
    x = random_bits(x_shape, F32, RNG)
    y = poisoned(y_shape, F32)
    cp_async_window.interpret(x, y, COL=col, TRACED=traced, BARRIER=barrier)
    rows, cols = y_shape[1:]
    expected = np.stack([x[i * rows : (i + 1) * rows, col : col + cols] for i in range(y_shape[0])])
    assert raw(y) == raw(expected)


@pytest.mark.parametrize("barrier", [True, False])
@pytest.mark.parametrize("swizzle, tiled, x_shape, y_shape", SWIZZLED_CASES, ids=SWIZZLE_IDS)
def test_swizzled_bytes_equal_a_tma_load(swizzle, tiled, x_shape, y_shape, barrier):
    x = random_bits(x_shape, BF16, RNG)
    by_cp_async, by_tma = poisoned(y_shape, BF16), poisoned(y_shape, BF16)
    constexprs = dict(SWIZZLE=swizzle, TILED=tiled, BARRIER=barrier)
    swizzled_rows.interpret(x, by_cp_async, ENGINE="cp_async", **constexprs)
    swizzled_rows.interpret(x, by_tma, ENGINE="tma", **constexprs)
    assert raw(by_cp_async) == raw(by_tma)
    assert raw(by_cp_async) == expected_swizzled_rows(x, y_shape, swizzle, tiled).tobytes()


# -- interpreter diagnostics --------------------------------------------------------------------


@ad.kernel(grid=(1,))
def loads_at(x, y, ROW: ad.constexpr, COL: ad.constexpr, AWAIT: ad.constexpr, FENCE: ad.constexpr):
    buf = ad.smem(y.shape, x.dtype)
    window = x.at[ad.ds(ad.program_id(0) + ROW, y.shape[0]), ad.ds(ad.program_id(0) + COL, y.shape[1])]
    ad.async_copy(window, buf, implementation="cp_async")  # the copy
    if AWAIT:
        ad.await_cp_async_copy(0)
    if FENCE:
        ad.fence_async_smem()
    ad.async_copy(buf, y, oob="promise_in_bounds")  # the store
    ad.await_async_copy(0)


def run_loads_at(row=0, col=0, await_=True, fence=True):
    x = random_bits((64, 64), F32, RNG)
    y = poisoned((16, 16), F32)
    loads_at.interpret(x, y, ROW=row, COL=col, AWAIT=await_, FENCE=fence)
    return x, y


def test_traced_start_out_of_bounds():
    with pytest.raises(ad.AssumptionError, match=r"cannot read outside the array.*window of 16 outside the "
                                                 r"dim of size 64 \(found 56\)"):
        run_loads_at(row=56)


def test_traced_start_off_the_chunk():
    with pytest.raises(ad.AssumptionError,
                       match=r"16-byte chunks\) needs its GMEM address 16-byte aligned.*found 0, 1"):
        run_loads_at(col=1)


def test_reading_before_awaiting_the_group_is_a_race():
    with pytest.raises(ad.RaceError, match=r"bulk store reads .*cp\.async copy at .*await cp\.async group 1"):
        run_loads_at(await_=False)


def test_async_proxy_use_needs_a_proxy_fence():
    with pytest.raises(ad.RaceError, match=r"fence_async_smem\(\) must order it before async-proxy use"):
        run_loads_at(fence=False)


def test_awaited_and_fenced_is_right():
    x, y = run_loads_at(row=8, col=4)
    assert raw(y) == raw(x[8:24, 4:20])


@ad.kernel(grid=(1,))
def two_copies_one_barrier(x, y):
    """Two cp.async copies and a TMA load complete on one barrier of arrival count 3: each copy
    counts one warpgroup arrival, whatever its number of threads."""
    bufs = ad.smem((3, 16, 16), x.dtype)
    bar = ad.barrier(arrival_count=3)
    ad.async_copy(x.at[ad.ds(0, 16), ad.ds(0, 16)], bufs.at[0], barrier=bar, implementation="cp_async")
    ad.async_copy(x.at[ad.ds(16, 16), ad.ds(0, 16)], bufs.at[1], barrier=bar, implementation="cp_async")
    ad.async_copy(x.at[ad.ds(32, 16), ad.ds(0, 16)], bufs.at[2], barrier=bar)
    bar.wait()
    ad.fence_async_smem()
    ad.async_copy(bufs, y, oob="promise_in_bounds")
    ad.await_async_copy(0)


def test_cp_async_arrivals_count_per_copy():
    x = random_bits((64, 16), F32, RNG)
    y = poisoned((3, 16, 16), F32)
    two_copies_one_barrier.interpret(x, y)
    assert raw(y) == raw(x[:48].reshape(3, 16, 16))


@ad.kernel(grid=(1,))
def waits_without_arriving(x, y):
    buf = ad.smem(y.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, 16), :], buf, barrier=bar, implementation="cp_async", arrive=False)
    bar.wait()  # the wait


def test_a_copy_that_does_not_arrive_leaves_the_phase_open():
    with pytest.raises(ad.DeadlockError, match="1 of 1 arrivals pending"):
        waits_without_arriving.interpret(np.zeros((64, 16), np.float32), np.zeros((16, 16), np.float32))
