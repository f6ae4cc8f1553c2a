"""Contiguous bulk copies (`cp.async.bulk`, no tensor map): which copies take that road, their
IR and PTX (through ptxas), and the interpreter against numpy (the clamped tail included) and
its diagnostics.  Compile-time errors are in test_bulk_cp_async_errors.py."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from bulk_cp_async_kernels import (
    bulk_clamped_load,
    bulk_clamped_store,
    bulk_rows,
    bulk_tiled_rows,
    expected_clamped_load,
    expected_clamped_store,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples, line_of, poisoned, random_bits, raw
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.hw.bulk import clamped_bytes, is_contiguous_run
from asyncdsl.hw.transforms import apply_chain_array
from asyncdsl.passes.pipeline import ir_text, make_context

RNG = np.random.default_rng(5)
F32 = ad.float32
X_LEN, Y_LEN = 1000, 256  # a 4000-byte array and a 1024-byte buffer


# -- the engine choice --------------------------------------------------------------------------


def one_load(shape, window, smem_shape, dtype=F32, **copy_kwargs):
    @ad.kernel(grid=(1,))
    def kernel(x):
        buf = ad.smem(smem_shape, x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[window], buf, barrier=bar, **copy_kwargs)  # the copy
        bar.wait()

    return kernel, ad.ArraySpec(shape, dtype)


def resolved(kernel, spec) -> str:
    return kernel.ir(spec, after="resolve-transforms")


@pytest.mark.parametrize("oob", ["undefined", "promise_in_bounds"])
def test_a_contiguous_slice_without_zero_fill_is_one_bulk_copy(oob):
    kernel, spec = one_load((64, 1000), (ad.ds(8, 4), slice(None)), (4, 1000), oob=oob)
    ir = resolved(kernel, spec)
    assert '"asyncdsl.bulk_load"' in ir and f'oob = #asyncdsl<oob {oob}>' in ir and "tma_load" not in ir
    assert "descriptors = []" in kernel.ir(spec, after="allocate-descriptor-scratch")


@pytest.mark.parametrize(
    "window, smem_shape, kwargs, why",
    [
        ((ad.ds(8, 4), slice(None)), (4, 64), {}, "oob='zeros' (the default) zero-fills through TMA"),
        ((ad.ds(8, 4), ad.ds(0, 32)), (4, 32), {"oob": "undefined"}, "rows of a window are not one run"),
        ((ad.ds(8, 4), ad.ds(0, 32)), (4, 32), {"oob": "undefined", "swizzle": 128}, "swizzle: a tensor map"),
    ],
)
def test_everything_else_takes_the_tiled_tma_path(window, smem_shape, kwargs, why):
    kernel, spec = one_load((64, 64), window, smem_shape, **kwargs)
    assert '"asyncdsl.tma_load"' in resolved(kernel, spec), why


def test_contiguity_is_judged_after_the_transforms():
    # Whole rows tiled by (8, all columns): the tiles follow each other in memory.
    assert is_contiguous_run((64, 32), (16, 32), (ad.TileTransform((8, 32)),), (2, 1, 8, 32))
    # Tiling the columns reorders them: not one run any more.
    assert not is_contiguous_run((64, 32), (16, 32), (ad.TileTransform((8, 16)),), (2, 2, 8, 16))
    # A transpose of a window with more than one row reorders it too.
    assert not is_contiguous_run((64, 32), (4, 32), (ad.TransposeTransform((1, 0)),), (32, 4))
    # Squeezed dims and windows along one dim are runs.
    assert is_contiguous_run((4, 64, 32), (-1, 2, 32), (), (2, 32))
    assert is_contiguous_run((4, 64, 32), (-1, -1, 16), (), (16,))


def _run_by_offsets(gmem_shape, sizes, transforms, smem_shape) -> bool:
    """The reference: lay out the element offsets of the window and look at them."""
    strides = np.cumprod((1, *gmem_shape[:0:-1]))[::-1]
    kept = [(size, stride) for size, stride in zip(sizes, strides) if size != -1]
    offsets = np.zeros([size for size, _ in kept], np.int64)
    for axis, (size, stride) in enumerate(kept):
        offsets += (np.arange(size) * stride).reshape([-1 if a == axis else 1 for a in range(len(kept))])
    try:
        laid_out = apply_chain_array(transforms, offsets)
    except ad.TransformError:
        return False
    flat = np.ascontiguousarray(laid_out).reshape(-1)
    return laid_out.shape == tuple(smem_shape) and bool(np.array_equal(flat, np.arange(flat.size)))


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_a_run_is_found_exactly_where_the_window_offsets_say(data):
    rank = data.draw(st.integers(1, 3))
    gmem_shape = tuple(data.draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=rank, max_size=rank)))
    sizes = tuple(data.draw(st.sampled_from([-1, *range(1, extent + 1)])) if extent > 1
                  else data.draw(st.sampled_from([-1, 1])) for extent in gmem_shape)
    sliced = tuple(size for size in sizes if size != -1) or (1,)
    transforms = ()
    if len(sliced) >= 2 and data.draw(st.booleans()):
        permutation = tuple(data.draw(st.permutations(range(len(sliced)))))
        transforms = (ad.TransposeTransform(permutation),)
    elif sliced and data.draw(st.booleans()):
        tile = tuple(data.draw(st.sampled_from([d for d in range(1, s + 1) if s % d == 0]))
                     for s in sliced[-1:])
        transforms = (ad.TileTransform(tile),)
    try:
        shape = sliced
        for transform in transforms:
            shape = transform.transform_shape(shape)
    except ad.TransformError:
        return
    if all(size == -1 for size in sizes):
        return
    assert (is_contiguous_run(gmem_shape, sizes, transforms, shape)
            == _run_by_offsets(gmem_shape, sizes, transforms, shape))


def test_a_huge_window_is_decided_without_laying_it_out():
    start = time.perf_counter()
    assert is_contiguous_run((32768, 32768), (32768, 32768), (), (32768, 32768))
    assert not is_contiguous_run((32768, 65536), (32768, 32768), (), (32768, 32768))
    assert time.perf_counter() - start < 0.1


def test_clamp_follows_the_reference():
    assert clamped_bytes(0, 1024, 4000) == 1024
    assert clamped_bytes(3200, 1024, 4000) == 800
    assert clamped_bytes(4000, 1024, 4000) == 0
    assert clamped_bytes(-256, 1024, 4000) == 0  # unsigned in the reference: huge, so nothing


# -- IR round trip and PTX ----------------------------------------------------------------------


def clamped_load_args(start=800, traced=True, arrive=True):
    x = ad.ArraySpec((X_LEN,), F32)
    y = ad.ArraySpec((Y_LEN,), F32)
    return (x, y, y), {"START": start, "TRACED": traced, "ARRIVE": arrive}


@pytest.mark.parametrize("stage", ["resolve-transforms", "allocate-descriptor-scratch"])
def test_bulk_ops_round_trip(stage):
    args, kwargs = clamped_load_args()
    text = bulk_clamped_load.ir(*args, after=stage, **kwargs)
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    assert ir_text(parsed) == text


@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize("arrive", [True, False])
@pytest.mark.parametrize("start", [0, 800, 1000, -64])
def test_clamped_load_ptx_assembles(start, traced, arrive, ptxas):
    args, kwargs = clamped_load_args(start, traced, arrive)
    ptxas(bulk_clamped_load.ptx(*args, **kwargs))


def test_traced_clamp_is_computed_on_the_gpu():
    args, kwargs = clamped_load_args(800, traced=True, arrive=False)
    ptx = bulk_clamped_load.ptx(*args, **kwargs)
    # No tensor map at all: three pointer params.
    assert ".param .align 64" not in ptx and ptx.count(".param .u64") == 3
    assert re.search(r"ld\.param\.u64 %rd\d+, \[bulk_clamped_load_param_0\];", ptx)
    assert "cvta.to.global.u64" in ptx
    assert re.search(r"min\.u64 %rd\d+, %rd\d+, 4000;", ptx)  # the array's bytes
    assert re.search(r"min\.u64 %rd\d+, %rd\d+, 1024;", ptx)  # the transfer's bytes
    # Not arriving: the user announced 1024 bytes, the copy completes the rest itself.
    assert re.search(r"mbarrier\.complete_tx\.relaxed\.cta\.shared::cta\.b64 \[%r\d+\], %r\d+;", ptx)
    assert re.search(
        r"@%p\d+ cp\.async\.bulk\.shared::cluster\.global\.mbarrier::complete_tx::bytes "
        r"\[%r\d+\], \[%rd\d+\], %r\d+, \[%r\d+\];", ptx
    )


def test_static_clamp_is_folded():
    args, kwargs = clamped_load_args(800, traced=False, arrive=True)
    ptx = bulk_clamped_load.ptx(*args, **kwargs)
    assert "min.u64" not in ptx and "complete_tx.relaxed" not in ptx
    assert re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], 800;", ptx)
    assert re.search(r"cp\.async\.bulk\.shared::cluster\.global\S* \[%r\d+\], \[%rd\d+\], 800, ", ptx)
    # Nothing left to move: no copy instruction, the arrival alone completes the phase.
    args, kwargs = clamped_load_args(1000, traced=False, arrive=True)
    ptx = bulk_clamped_load.ptx(*args, **kwargs)
    assert len(re.findall(r"cp\.async\.bulk\.shared::cluster", ptx)) == 1  # the fill only
    assert re.search(r"expect_tx\.shared::cta\.b64 _, \[%r\d+\], 0;", ptx)


def test_bulk_store_ptx(ptxas):
    spec = ad.ArraySpec((Y_LEN,), F32)
    ptx = bulk_clamped_store.ptx(spec, ad.ArraySpec((X_LEN,), F32), START=900, TRACED=True)
    ptxas(ptx)
    store = r"@%p\d+ cp\.async\.bulk\.global\.shared::cta\.bulk_group \[%rd\d+\], \[%r\d+\], %r\d+;"
    assert re.search(store, ptx)
    assert "cp.async.bulk.commit_group;" in ptx and "cp.async.bulk.wait_group.read 0;" in ptx


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int8, ad.float64])
def test_rows_longer_than_a_tma_box_assemble(dtype, ptxas):
    spec = ad.ArraySpec((64, 2048 // dtype.itemsize), dtype)
    ptxas(bulk_rows.ptx(spec, spec, ROWS=4, OOB="undefined"))


# -- the interpreter against numpy --------------------------------------------------------------


@pytest.mark.parametrize("oob", ["undefined", "promise_in_bounds"])
@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int8, ad.float64, ad.float8_e4m3fn])
def test_rows_move_bit_exactly(dtype, oob):
    x = random_bits((64, 4096 // dtype.itemsize), dtype, RNG)  # rows of 4096 bytes
    y = poisoned(x.shape, dtype)
    bulk_rows.interpret(x, y, ROWS=4, OOB=oob)
    assert raw(x) == raw(y)


@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize("arrive", [True, False])
@pytest.mark.parametrize("start", [0, 744, 800, 996, 1000, 2048, -64])
def test_clamped_load_leaves_the_tail_as_it_was(start, traced, arrive):
    x = random_bits((X_LEN,), F32, RNG)
    fill = random_bits((Y_LEN,), F32, RNG)
    y = poisoned((Y_LEN,), F32)
    bulk_clamped_load.interpret(x, fill, y, START=start, TRACED=traced, ARRIVE=arrive)
    assert raw(y) == raw(expected_clamped_load(x, fill, start))


@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize("start", [0, 8, 500, 996, 1000, 4096])
def test_clamped_store_drops_what_runs_past_the_end(start, traced):
    x = random_bits((Y_LEN,), F32, RNG)
    y = random_bits((X_LEN,), F32, RNG)
    expected = expected_clamped_store(x, y, start)
    bulk_clamped_store.interpret(x, y, START=start, TRACED=traced)
    assert raw(y) == raw(expected)


def test_tiled_whole_rows_move_as_one_run():
    x = random_bits((64, 32), ad.bfloat16, RNG)
    y = poisoned((4, 2, 1, 8, 32), ad.bfloat16)
    assert '"asyncdsl.bulk_load"' in bulk_tiled_rows.ir(x, y, ROWS=16, TILE=8, after="resolve-transforms")
    bulk_tiled_rows.interpret(x, y, ROWS=16, TILE=8)
    tile = (ad.TileTransform((8, 32)),)
    assert raw(y) == raw(np.stack([apply_chain_array(tile, x[i * 16 : (i + 1) * 16]) for i in range(4)]))


# -- interpreter diagnostics --------------------------------------------------------------------


@ad.kernel(grid=(1,))
def promised_load(x, y, START: ad.constexpr):
    buf = ad.smem(y.shape, x.dtype)
    bar = ad.barrier()
    window = x.at[ad.ds(ad.program_id(0) + START, y.shape[0])]
    ad.async_copy(window, buf, barrier=bar, oob="promise_in_bounds")  # the copy
    bar.wait()


def test_a_broken_promise_is_an_assumption_error_at_the_copy():
    x = np.zeros(X_LEN, np.float32)
    with pytest.raises(ad.AssumptionError) as caught:
        promised_load.interpret(x, np.zeros(Y_LEN, np.float32), START=800)
    message = str(caught.value)
    assert ("cannot read outside the array" in message
            and "window of 256 outside the dim of size 1000" in message)
    assert "(found 800)" in message
    assert f"test_bulk_copies.py:{line_of(promised_load.fn, '# the copy')}" in message


def test_a_traced_start_off_16_bytes_is_an_assumption_error():
    with pytest.raises(ad.AssumptionError, match="16-byte aligned.*misaligned address.*found 2"):
        promised_load.interpret(np.zeros(X_LEN, np.float32), np.zeros(Y_LEN, np.float32), START=2)


@ad.kernel(grid=(1,))
def reads_before_the_wait(x, y):
    buf = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x, buf, barrier=bar, oob="undefined")  # the load
    ad.async_copy(buf, y, oob="undefined")
    ad.await_async_copy(0)
    bar.wait()


def test_reading_a_bulk_load_before_its_wait_is_a_race():
    with pytest.raises(ad.RaceError) as caught:
        reads_before_the_wait.interpret(np.zeros(64, np.float32), np.zeros(64, np.float32))
    message = str(caught.value)
    assert "the bulk store reads shared memory bytes [0, 256)" in message
    assert f"the bulk load at {__file__}:{line_of(reads_before_the_wait.fn, 'the load')}" in message


@ad.kernel(grid=(2,))
def store_far_in(x, y, OOB: ad.constexpr):
    """CTA i stores x at element 2^31 - 64 + 64 i of y: a traced start far into a huge array."""
    buf = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x, buf, barrier=bar, oob="promise_in_bounds")
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(ad.program_id(0) * 64 + (2**31 - 64), 64)], oob=OOB)
    ad.await_async_copy(0)


@pytest.mark.parametrize("oob", ["undefined", "promise_in_bounds"])
def test_checks_on_arrays_past_32_bit_indices_compare_within_32_bits(oob, monkeypatch, ptxas):
    # The bound of a traced start in a dim of 2^32 + 64 elements was once printed as a 64-bit
    # immediate of a 32-bit comparison (ptxas took it, cut to 32 bits: a false failure).
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    ptx = store_far_in.ptx(ad.ArraySpec((64,), ad.int8), ad.ArraySpec(((1 << 32) + 64,), ad.int8), OOB=oob)
    ptxas(ptx)
    for line in ptx.splitlines():
        if "setp" in line and ".s32" in line:
            assert all(-(2**31) <= int(n) < 2**31
                       for n in re.findall(r"(?<![%\w])-?\d+", line.split(",", 1)[1])), line
