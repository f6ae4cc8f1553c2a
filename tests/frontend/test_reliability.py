"""Regressions of the differential fuzz: kernels that once gave wrong bytes without an error, or
refused valid input, or failed with Python's errors instead of a sentence at the user's line."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from reliability_kernels import (
    bulk_store_rows,
    folded_negative_row,
    hinted_tiles,
    multicast_tile,
    row_past_a_unit_dim,
    store_past_a_unit_dim,
    stores_above,
    stores_below_a_guard,
)
from support import line_of, random_bits

import asyncdsl as ad
from asyncdsl.config import knobs
from asyncdsl.runtime.ptxas import assemble

F32 = ad.float32


# -- 1. a traced index on a unit dim ---------------------------------------------------------------


def test_a_traced_index_past_a_unit_dim_reads_zeros():
    x = random_bits((1, 16), F32, 1)
    y = np.full((2, 16), 7.0, np.float32)
    row_past_a_unit_dim.interpret(x, y)
    assert not y.any()


def test_a_traced_store_past_a_unit_dim_writes_nothing():
    x = random_bits((2, 16), F32, 1)
    y = random_bits((1, 16), F32, 2)
    before = y.copy()
    store_past_a_unit_dim.interpret(x, y)
    assert y.tobytes() == before.tobytes()


def test_the_unit_dim_stays_in_the_tensor_map():
    ir = row_past_a_unit_dim.ir(ad.ArraySpec((1, 16), F32), ad.ArraySpec((2, 16), F32),
                                after="resolve-transforms")
    load = next(line for line in ir.splitlines() if "asyncdsl.tma_load" in line)
    assert "dims = [1, 16]" in load and "box = [1, 16]" in load


# -- 2. and 3. traced starts on tiles and of 4-bit copies ---------------------------------------------


@ad.kernel(grid=(2,))
def tile_off_by_one(x, y):
    """A 3-d window: one tensor map through the tiling, which must start on a tile (a 2-d window
    would go one box a tile from any start, `test_a_2d_window_starts_anywhere_one_box_a_tile`)."""
    buf = ad.smem((2, 1, 1, 8, 16), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, ad.ds(ad.program_id(0) * 8 + 1, 8), :], buf, barrier=bar,  # the load
                  transforms=ad.TileTransform((8, 16)))
    bar.wait()


@ad.kernel(grid=(2,))
def odd_4_bit_start(x, y):
    buf = ad.smem((32,), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(ad.program_id(0) + 1, 32)], buf, barrier=bar)  # the load
    bar.wait()


@pytest.mark.parametrize(
    "kernel, spec, wanted",
    [
        (tile_off_by_one, ad.ArraySpec((2, 32, 16), F32), "must be a multiple of its tile 8"),
        (odd_4_bit_start, ad.ArraySpec((64,), ad.int4), "must be a multiple of 2 elements"),
    ],
)
def test_a_traced_start_that_cannot_be_proved_aligned_is_refused_with_the_hint(kernel, spec, wanted):
    with pytest.raises(ad.CopyError) as caught:
        kernel.compile(spec, spec)
    message = str(caught.value)
    assert wanted in message and "asyncdsl.multiple_of(start," in message
    assert caught.value.location.line == line_of(kernel.fn, "# the load")


@ad.kernel(grid=(2,))
def tiles_from_a_traced_row(x, y, row: int):
    buf = ad.smem((2, 2, 8, 64), x.dtype)
    bar = ad.barrier()
    rows = ad.ds(row + ad.program_id(0) * 16, 16)
    ad.async_copy(x.at[rows, :], buf, barrier=bar, transforms=ad.TileTransform((8, 64)), swizzle=128)
    bar.wait()
    ad.async_copy(buf, y.at[rows, :], transforms=ad.TileTransform((8, 64)), swizzle=128)
    ad.await_async_copy(0)


def test_a_2d_window_starts_anywhere_one_box_a_tile():
    """A traced start the compiler cannot prove on a tile boundary: one TMA box a tile from the
    untiled tensor map (2 x 2 tiles a CTA), rows past the array zero-filled on the way in and
    clipped on the way out."""
    x = random_bits((40, 128), ad.bfloat16, 4)
    y = np.zeros_like(x)
    tiles_from_a_traced_row.interpret(x, y, 5)
    expected = np.zeros_like(x)
    expected[5:37] = x[5:37]
    assert y.tobytes() == expected.tobytes()
    assert tiles_from_a_traced_row.ptx(*(ad.ArraySpec((40, 128), ad.bfloat16),) * 2, 5).count(
        "cp.async.bulk.tensor.2d.shared::cluster.global") == 4


def test_a_provable_start_needs_no_hint():
    x = random_bits((32, 16), F32, 3)
    y = np.zeros_like(x)
    hinted_tiles.interpret(x, y, OFFSET=0, HINT=True)
    assert y[:16].tobytes() == x[:16].tobytes()
    # Unhinted, the 2-d window goes one box a tile from the untiled tensor map, as from any row.
    specs = (ad.ArraySpec((32, 16), F32),) * 2
    assert "dims = [4, 8, 16]" in hinted_tiles.ir(*specs, OFFSET=0, HINT=True, after="resolve-transforms")
    assert "dims = [32, 16]" in hinted_tiles.ir(*specs, OFFSET=0, HINT=False, after="resolve-transforms")
    unhinted = np.zeros_like(x)
    hinted_tiles.interpret(x, unhinted, OFFSET=0, HINT=False)
    assert unhinted.tobytes() == y.tobytes()


def test_a_false_hint_is_an_error_at_its_line():
    x = random_bits((32, 16), F32, 3)
    with pytest.raises(ad.AssumptionError, match=r"promised a multiple of 8, but the value is 4") as caught:
        hinted_tiles.interpret(x, np.zeros_like(x), OFFSET=4)
    assert caught.value.location.line == line_of(hinted_tiles.fn, "# the hint")


def test_a_static_hint_is_checked_while_tracing():
    @ad.kernel(grid=(1,))
    def static_hint(x):
        ad.multiple_of(12, 8)  # the hint

    with pytest.raises(ad.TraceError, match="12 is not a multiple of 8") as caught:
        static_hint.compile(ad.ArraySpec((16,), F32))
    assert caught.value.location.line == line_of(static_hint.fn, "# the hint")


# -- 4. debug mode ---------------------------------------------------------------------------------


def test_debug_mode_compiles_checks_that_assemble(monkeypatch, ptxas):
    specs = (ad.ArraySpec((32, 16), F32),) * 2
    plain = hinted_tiles.ptx(*specs, OFFSET=0)
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    assert knobs.debug
    checked = hinted_tiles.ptx(*specs, OFFSET=0)
    assert "atom.global.cas.b32" in checked and "atom" not in plain
    ptxas(checked)
    binary = hinted_tiles.compile(*specs, OFFSET=0).binary
    (report,) = [param for param in binary.params if type(param).__name__ == "ErrorBufferParam"]
    (hint,) = report.checks  # the store's coordinates are provably not negative: no check for them
    assert "promised a multiple of 8" in hint.message and hint.line == line_of(hinted_tiles.fn, "# the hint")


def test_without_debug_mode_checks_lower_to_nothing():
    specs = (ad.ArraySpec((32, 16), F32),) * 2
    ptx = stores_above.ptx(*specs)
    assert "atom" not in ptx and "param_4" not in ptx  # no error buffer parameter either


# -- 5. negative indices are coordinates -----------------------------------------------------------


def test_a_folded_negative_index_reads_zeros_like_a_traced_one():
    x = random_bits((4, 16), F32, 4)
    y = np.full((1, 16), 3.0, np.float32)
    folded_negative_row.interpret(x, y)
    assert not y.any()


# -- 6. 4-bit multicast ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [ad.float4_e2m1fn, ad.int4, ad.uint4, ad.int8])
def test_multicast_of_4_bit_elements_lands_in_both_ctas(dtype):
    raw = np.random.default_rng(5).integers(0, 16, (16, 256)).astype(np.uint8)
    x = raw.view(dtype.numpy)
    y = np.zeros((32, 256), dtype.numpy)
    multicast_tile.interpret(x, y)
    assert y.view(np.uint8).tobytes() == np.concatenate([raw, raw]).tobytes()


# -- 7. an ellipsis after a traced index -----------------------------------------------------------


def test_ellipsis_after_a_traced_index():
    @ad.kernel(grid=(4,))
    def rows(x, y):
        buf = ad.smem((16,), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.program_id(0), ...], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[ad.program_id(0), ...])
        ad.await_async_copy(0)

    x = random_bits((4, 16), F32, 6)
    y = np.zeros_like(x)
    rows.interpret(x, y)
    assert y.tobytes() == x.tobytes()


# -- 8. static negative store starts ---------------------------------------------------------------


def test_a_static_negative_store_start_is_refused_at_its_line():
    @ad.kernel(grid=(1,))
    def negative_store(x, y):
        buf = ad.smem((16,), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(0, 16)], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[ad.ds(-8, 16)])  # the store

    with pytest.raises(ad.CopyError, match="negative coordinates fault on the H200") as caught:
        negative_store.compile(ad.ArraySpec((64,), F32), ad.ArraySpec((64,), F32))
    assert caught.value.location.line == line_of(negative_store.fn, "# the store")


def test_a_traced_negative_store_coordinate_is_an_assumption_error():
    x = random_bits((16, 16), F32, 7)
    with pytest.raises(ad.AssumptionError, match=r"negative.*\(found -16\)") as caught:
        stores_above.interpret(x, np.zeros((32, 16), np.float32))
    assert caught.value.location.line == line_of(stores_above.fn, "# the store")


# -- 9. huge shapes fail fast with a sentence ------------------------------------------------------


@pytest.mark.parametrize(
    "shape, window, wanted",
    [
        ((32768, 32768), (32768, 32768), "TMA box dimension"),
        ((2**31, 16), (256, 16), None),
        ((2**33, 16), (256, 16), r"at least 2\^32"),
    ],
)
def test_huge_shapes_compile_or_fail_quickly(shape, window, wanted):
    @ad.kernel(grid=(1,))
    def big(x, y):
        buf = ad.smem(window, x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(0, window[0]), :], buf, barrier=bar)
        bar.wait()

    import time

    start = time.perf_counter()
    specs = (ad.ArraySpec(shape, ad.int8), ad.ArraySpec((16,), ad.int8))
    if wanted is None:
        assemble(big.ptx(*specs))
    else:
        with pytest.raises(ad.AsyncDSLError, match=wanted):
            big.compile(*specs)
    assert time.perf_counter() - start < 5


# -- 10. and 11. errors name the user's line in a sentence -----------------------------------------


def test_construction_errors_of_transforms_and_windows_name_the_line():
    @ad.kernel(grid=(1,))
    def bad(x, WHICH: ad.constexpr):
        if WHICH == "tile":
            ad.TileTransform((0, 64))  # the error
        elif WHICH == "transpose":
            ad.TransposeTransform((0, 0))  # the error
        elif WHICH == "rounding":
            ad.TileTransform((8, 64), rounding="sideways")  # the error
        elif WHICH == "ds":
            ad.ds(0, 0)  # the error
        elif WHICH == "dtype":
            ad.smem((16,), np.complex64)  # the error
        elif WHICH == "iterate":
            for _ in ad.program_id(0):  # the error
                pass

    for which in ("tile", "transpose", "rounding", "ds", "dtype", "iterate"):
        with pytest.raises(ad.AsyncDSLError) as caught:
            bad.compile(ad.ArraySpec((16,), F32), WHICH=which)
        assert caught.value.location is not None, which
        assert caught.value.location.file == __file__, which
        assert caught.value.location.line == line_of(bad.fn, "# the error") + 2 * (
            ("tile", "transpose", "rounding", "ds", "dtype", "iterate").index(which)
        ), which


def test_a_kernel_that_returns_a_value_is_told_at_the_return():
    @ad.kernel(grid=(1,))
    def returns(x):
        return 3  # the return

    with pytest.raises(ad.TraceError, match="returned int") as caught:
        returns.compile(ad.ArraySpec((16,), F32))
    assert caught.value.location.line == line_of(returns.fn, "# the return")


def test_a_grid_function_with_other_names_is_told_so():
    @ad.kernel(grid=lambda a, b: (1,))
    def named(x, y):
        pass

    with pytest.raises(ad.ArgumentError, match=r"grid function .* by name \(x, y\) and cannot take them"):
        named.interpret(np.zeros(16, np.float32), np.zeros(16, np.float32))


def test_a_grid_function_that_fails_is_an_argument_error_at_the_call():
    @ad.kernel(grid=lambda x, BLOCK: (x.shape[0] // BLOCK,))
    def blocks(x, BLOCK: ad.constexpr):
        pass

    with pytest.raises(ad.ArgumentError,
                       match="the grid function of kernel blocks raised ZeroDivisionError") as caught:
        blocks.interpret(np.zeros(16, np.float32), BLOCK=0)  # the call
    assert caught.value.location.line == inspect.currentframe().f_lineno - 1
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


def test_a_runtime_int_used_as_a_python_int_suggests_constexpr():
    @ad.kernel(grid=(1,))
    def takes_n(x, n):
        for _ in range(n):  # the loop
            pass

    with pytest.raises(ad.TraceError,
                       match=r"argument 'n' is a runtime int.*`n: asyncdsl.constexpr`") as caught:
        takes_n.interpret(np.zeros(16, np.float32), 3)
    assert caught.value.location.line == line_of(takes_n.fn, "# the loop")


def test_numpy_integers_are_grids_and_constexprs():
    @ad.kernel(grid=lambda x, y, B: (np.int64(x.shape[0] // B),))
    def copy_rows(x, y, B: ad.constexpr):
        buf = ad.smem((B,), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(ad.program_id(0) * B, B)], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[ad.ds(ad.program_id(0) * B, B)])
        ad.await_async_copy(0)

    x = random_bits((64,), F32, 8)
    y = np.zeros_like(x)
    copy_rows.interpret(x, y, B=np.int64(16))
    assert y.tobytes() == x.tobytes()



@pytest.mark.parametrize("flag", [True, False, np.bool_(True), np.bool_(False)])
def test_a_bool_constexpr_stays_a_bool(flag):
    """A constexpr flag keeps its type in the trace (it read as 1.0 or 0.0 once, which a kernel
    testing `isinstance(FLAG, bool)` refused and an error message printed)."""
    seen = []

    @ad.kernel(grid=(1,))
    def flagged(x, y, FLAG: ad.constexpr):
        seen.append(FLAG)
        ad.store(y.at[:], ad.load(x.at[:]))

    x = random_bits((128,), F32, 9)
    y = np.zeros_like(x)
    flagged.interpret(x, y, FLAG=flag)
    assert seen and type(seen[0]) is bool and seen[0] == bool(flag)
    assert y.tobytes() == x.tobytes()

# -- 12. alignment ---------------------------------------------------------------------------------


def test_the_interpreter_refuses_a_misaligned_array_as_the_gpu_does():
    x = np.zeros(65, np.float32)[1:]
    assert x.ctypes.data % 16  # a view 4 bytes into its buffer
    with pytest.raises(ad.ArgumentError, match="not 16-byte aligned"):
        folded_negative_row.interpret(x.reshape(4, 16), np.zeros((1, 16), np.float32))


# -- 13. misused copy options are TraceErrors at the line, not Python's errors ---------------------


@pytest.mark.parametrize(
    "option, wanted",
    [
        (dict(swizzle="128"), "swizzle must be one of"),  # once AttributeError
        (dict(swizzle=64.0), "swizzle must be one of"),  # once AttributeError
        (dict(swizzle=True), "swizzle must be one of"),
        (dict(swizzle=48), "swizzle must be one of"),
        (dict(arrive="no"), "arrive must be True or False"),  # once ValueError
        (dict(arrive=None), "arrive must be True or False"),
        (dict(transforms=ad.TileTransform), "not the class"),  # once TypeError: not iterable
        (dict(transforms=8), "transforms must be"),
        (dict(collective=1), "collective must name cluster dims"),
        (dict(collective=("x", 2)), "collective must name cluster dims"),
        (dict(reduction=("add",)), "reduction must be one of"),
        (dict(oob=3), "oob must be one of"),
    ],
)
def test_a_misused_copy_option_is_a_trace_error_at_the_copy(option, wanted):
    @ad.kernel(grid=(1,))
    def store(x, y, OPTION: ad.constexpr):
        buf = ad.smem((16,), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(0, 16)], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[ad.ds(0, 16)], **dict(OPTION))  # the copy

    specs = (ad.ArraySpec((64,), F32),) * 2
    with pytest.raises(ad.TraceError, match=wanted) as caught:
        store.compile(*specs, OPTION=tuple(option.items()))
    assert caught.value.location.line == line_of(store.fn, "# the copy")


def test_numpy_scalars_are_options_too():
    @ad.kernel(grid=(1,))
    def store(x, y):
        buf = ad.smem((16,), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(0, 16)], buf, barrier=bar, swizzle=np.int64(16))
        bar.wait()
        ad.async_copy(buf, y.at[ad.ds(0, 16)], arrive=np.True_)
        ad.await_async_copy(0)

    x = random_bits((64,), F32, 13)
    y = np.zeros_like(x)
    store.interpret(x, y)
    assert y[:16].tobytes() == x[:16].tobytes()


@pytest.mark.parametrize("option", [dict(swizzle="64"), dict(transforms=ad.TileTransform)])
def test_a_misused_prefetch_option_is_a_trace_error(option):
    @ad.kernel(grid=(1,))
    def prefetch(x, OPTION: ad.constexpr):
        ad.async_prefetch(x.at[ad.ds(0, 16)], **dict(OPTION))  # the prefetch

    with pytest.raises(ad.TraceError) as caught:
        prefetch.compile(ad.ArraySpec((64,), F32), OPTION=tuple(option.items()))
    assert caught.value.location.line == line_of(prefetch.fn, "# the prefetch")


# -- 14. numbers past the coordinates' and registers' range ---------------------------------------


@ad.kernel(grid=(1,))
def window_at(x, START: ad.constexpr, TRACED: ad.constexpr, OOB: ad.constexpr = "zeros"):
    buf = ad.smem((16,), x.dtype)
    bar = ad.barrier()
    start = ad.program_id(0) + START if TRACED else START  # the start
    ad.async_copy(x.at[ad.ds(start, 16)], buf, barrier=bar, oob=OOB)  # the copy
    bar.wait()


def test_a_static_tma_start_past_32_bits_is_refused_at_the_copy():
    # It once compiled to a wrapped coordinate: another element.
    spec = ad.ArraySpec(((1 << 31) + 64,), ad.int8)
    with pytest.raises(ad.CopyError, match="signed 32-bit coordinates of TMA") as caught:
        window_at.compile(spec, START=(1 << 31) + 16, TRACED=False)
    assert caught.value.location.line == line_of(window_at.fn, "# the copy")


def test_a_python_int_past_32_bits_in_traced_index_arithmetic_is_refused():
    # It once wrapped silently in the 32-bit index registers, on the GPU and in the interpreter.
    spec = ad.ArraySpec((1 << 20,), ad.int8)
    with pytest.raises(ad.TraceError, match="does not fit traced index arithmetic") as caught:
        window_at.compile(spec, START=1 << 40, TRACED=True, OOB="undefined")
    assert caught.value.location.line == line_of(window_at.fn, "# the start")


@ad.kernel(grid=(1,))
def past_32_bits(x, flags, WHERE: ad.constexpr):
    big = (1 << 32) + 1
    if WHERE == "loop":
        for _ in ad.range(big):  # the loop
            pass
    elif WHERE == "window":
        row = ad.load(x.at[ad.ds(big, 1), ad.ds(0, 128)])  # the window
        ad.store(x.at[ad.ds(0, 1), ad.ds(0, 128)], row)
    else:
        ad.signal(flags.at[big], 1)  # the signal


@pytest.mark.parametrize("where", ["loop", "window", "signal"])
def test_a_python_int_past_32_bits_as_a_loop_bound_window_start_or_cell_is_refused(where):
    # Each once wrapped silently: a loop of 2**32 + 1 steps ran one, the window and the cell were
    # row and cell 1 (interpreter and GPU alike).
    specs = ad.ArraySpec((64, 128), ad.float32), ad.ArraySpec((8,), ad.int32)
    with pytest.raises(ad.TraceError, match="4294967297 does not fit traced index arithmetic") as caught:
        past_32_bits.compile(*specs, WHERE=where)
    assert caught.value.location.line == line_of(past_32_bits.fn, f"# the {where}")


def test_a_bulk_start_past_64_bit_addresses_is_refused():
    # It once printed a constant ptxas refused.
    spec = ad.ArraySpec((1 << 20,), ad.int8)
    with pytest.raises(ad.CopyError, match="beyond the 64-bit addresses") as caught:
        window_at.compile(spec, START=1 << 70, TRACED=False, OOB="undefined")
    assert caught.value.location.line == line_of(window_at.fn, "# the copy")


# -- 15. a bulk store under oob="undefined" writes only inside its slice --------------------------


def rows_and_slabs(ctas: int):
    return random_bits((ctas, 2, 16), F32, 9), random_bits((4, 4, 16), F32, 10)


def test_a_static_bulk_store_whose_run_leaves_its_slice_is_refused():
    x, y = rows_and_slabs(1)
    with pytest.raises(ad.CopyError, match="would overwrite elements outside the slice") as caught:
        bulk_store_rows.interpret(x, y, SLAB=1, ROW=3, STEP=0)
    assert caught.value.location.line == line_of(bulk_store_rows.fn, "# the store")


def test_a_static_bulk_store_past_the_arrays_end_is_clamped():
    x, y = rows_and_slabs(1)
    expected = y.copy()
    expected[3, 3] = x[0, 0]
    bulk_store_rows.interpret(x, y, SLAB=3, ROW=3, STEP=0)
    assert y.tobytes() == expected.tobytes()


def test_a_traced_bulk_store_whose_run_leaves_its_slice_is_an_assumption_error():
    x, y = rows_and_slabs(2)
    with pytest.raises(ad.AssumptionError,
                       match=r"would overwrite them, so the store was skipped \(found 3\)") as caught:
        bulk_store_rows.interpret(x, y, SLAB=1, ROW=1, STEP=2)
    assert caught.value.location.line == line_of(bulk_store_rows.fn, "# the store")


def test_traced_bulk_stores_inside_or_past_the_end_run():
    x, y = rows_and_slabs(2)
    expected = y.copy()
    expected[3, 1:3], expected[3, 3] = x[0], x[1, 0]  # CTA 1's second row is past the array's end
    bulk_store_rows.interpret(x, y, SLAB=3, ROW=1, STEP=2)
    assert y.tobytes() == expected.tobytes()
    x, y = rows_and_slabs(2)
    expected = y.copy()
    expected[1, 1:3] = x[0]  # CTA 1 leaves the slab: its predicate skips it, so nothing is checked
    bulk_store_rows.interpret(x, y, SLAB=1, ROW=1, STEP=2, GUARD=True)
    assert y.tobytes() == expected.tobytes()


def test_a_predicated_off_store_is_not_checked():
    x = random_bits((16, 16), F32, 11)
    y = random_bits((32, 16), F32, 12)
    expected = y.copy()
    expected[:16] = x
    stores_below_a_guard.interpret(x, y)
    assert y.tobytes() == expected.tobytes()


def test_debug_mode_skips_the_bulk_store_that_leaves_its_slice(monkeypatch, ptxas):
    specs = (ad.ArraySpec((2, 2, 16), F32), ad.ArraySpec((4, 4, 16), F32))
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    ptx = bulk_store_rows.ptx(*specs, SLAB=1, ROW=1, STEP=2)
    ptxas(ptx)
    assert re.search(r"@%p\d+ cp\.async\.bulk\.global\.shared::cta\.bulk_group", ptx)
    binary = bulk_store_rows.compile(*specs, SLAB=1, ROW=1, STEP=2).binary
    (report,) = [param for param in binary.params if type(param).__name__ == "ErrorBufferParam"]
    assert any("would overwrite them" in check.message for check in report.checks)
