"""Register tiles in the interpreter: the tile ops (full, splat, iota, broadcasts, relayouts),
reductions in the order of their tree, mutable registers across loops, and kernels that combine
them (elementwise math: test_tile_math.py; loads and stores: test_tile_access.py).

References are independent of the interpreter: reductions come from a walk of
`hw.reduction_tree` written here, thread by thread in plain Python, read back through
`layout.holders`; element results from numerics_reference.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numerics_reference as ref
import numpy as np
import pytest
from support import line_of
from tile_ir import LINE, run_op
from tile_kernels import traced_scalars_with_tiles

import asyncdsl as ad
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.layout_attrs import INFERRED, LayoutAttr, layout_of
from asyncdsl.hw.fragments import TiledLayout
from asyncdsl.hw.options import TileReduction
from asyncdsl.hw.reduction_tree import reduction_tree

RNG = np.random.default_rng(7)
I32, U32 = np.dtype(np.int32), np.dtype(np.uint32)


def ints(dtype):
    info = np.iinfo(dtype)
    values = np.concatenate([[0, 1, info.max, info.min, info.max - 1], RNG.integers(info.min, info.max, 123)])
    return values.astype(dtype)


# -- reductions: the tree's order, thread by thread -------------------------------------------------


def tree_reference(values: np.ndarray, layout, axes: tuple[int, ...], combine):
    """`values` reduced by walking `hw.reduction_tree` in plain Python, each thread on its own
    registers (`layout.coordinates`), then read back through the result layout's `holders`, all
    of whose copies must agree."""
    tree = reduction_tree(layout, values.shape, axes)
    vector = layout.vector_length
    coordinates = layout.coordinates(values.shape).reshape(128, -1, vector, values.ndim)
    threads = []
    for thread in range(128):
        registers = [[values[tuple(c)].item() for c in register] for register in coordinates[thread]]
        results = []
        for terms in tree.register_terms:
            accumulator = list(registers[terms[0]])
            for term in terms[1:]:
                accumulator = [combine(x, y) for x, y in zip(accumulator, registers[term])]
            if tree.fold_vector:
                folded = accumulator[0]
                for lane in accumulator[1:]:
                    folded = combine(folded, lane)
                accumulator = [folded]
            results.append(accumulator)
        threads.append(results)
    for mask in tree.lane_xors:
        threads = [[[combine(own, other) for own, other in zip(mine, theirs)]
                    for mine, theirs in zip(threads[t], threads[t ^ mask])] for t in range(128)]
    for group in tree.warp_groups:
        for lane in range(32):
            total = threads[group[0] * 32 + lane]
            for warp in group[1:]:
                total = [[combine(x, y) for x, y in zip(a, b)]
                         for a, b in zip(total, threads[warp * 32 + lane])]
            for warp in group:
                threads[warp * 32 + lane] = total
    flat = [[value for register in thread for value in register] for thread in threads]
    holders, slots = tree.result.holders(tree.result_shape)
    expected = []
    for index in np.ndindex(tree.result_shape):
        copies = [flat[t][s] for t, s in zip(holders[index], slots[index])]
        assert len({repr(c) for c in copies}) == 1, f"copies of result {index} disagree: {copies}"
        expected.append(copies[0])
    return expected


def combiner(kind: str, dtype: np.dtype):
    """The elementwise op a reduction of `kind` folds with, on Python numbers."""
    if dtype in (I32, U32):
        wrap = (lambda v: (v + 2**31) % 2**32 - 2**31) if dtype == I32 else (lambda v: v % 2**32)
        return {"sum": lambda x, y: wrap(x + y), "max": max, "min": min}[kind]
    if kind == "sum":
        if dtype == ref.F32:  # numpy's float32 scalars add by IEEE, a third derivation
            def add(x, y):
                with np.errstate(over="ignore"):
                    return math.nan if math.isnan(x + y) else float(np.float32(x) + np.float32(y))

            return add
        return lambda x, y: ref.add(x, y, dtype)
    return ref.maximum if kind == "max" else ref.minimum


@ad.kernel(grid=(1,))
def reduce_tile(x, y, LAYOUT: ad.constexpr, KIND: ad.constexpr, AXIS: ad.constexpr):
    buf = ad.smem(x.shape, x.dtype)
    out = ad.smem(y.shape, y.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[...], buf, barrier=loaded)
    loaded.wait()
    tile = ad.load(buf, layout=LAYOUT)
    out[...] = getattr(tile, KIND)(axis=AXIS)
    ad.fence_async_smem()
    ad.async_copy(out, y.at[...])
    ad.await_async_copy(0)


def reduction_input(dtype: np.dtype, shape=(64, 128)) -> np.ndarray:
    if dtype in (I32, U32):
        return ints(dtype)[RNG.integers(0, 128, shape)]
    values = RNG.standard_normal(shape) * 2.0 ** RNG.integers(-10, 10, shape)  # sums depend on the order
    special = ref.float_values(dtype, 0, RNG)
    picks = RNG.random(shape) < 0.02
    values = values.astype(dtype)
    values[picks] = special[RNG.integers(0, special.size, picks.sum())]
    return values


ROW = None  # no layout given: infer-layouts picks the row layout (warps over rows, lanes over columns)
CASES = [
    # (layout given, axis): the row layout folds vectors and lanes; WGMMA over columns folds
    # registers, vectors and 2 lane bits; WGMMA over rows needs 3 lane bits and the warps.
    (ROW, 1), (ad.WGMMA, 1), (ad.WGMMA, 0),
]


def check_reduction(dtype, layout, axis, kind, values=None):
    x = reduction_input(dtype) if values is None else values
    y = np.zeros(x.shape[1 - axis], dtype)
    reduce_tile.interpret(x, y, LAYOUT=layout, KIND=kind, AXIS=axis)
    module = reduce_tile.compile(x, y, LAYOUT=layout, KIND=kind, AXIS=axis).module
    (reduce,) = [op for op in module.walk() if isinstance(op, ir.ReduceOp)]
    ran = layout_of(reduce.operand)
    assert ran == layout if layout is not None else isinstance(ran, TiledLayout)
    expected = tree_reference(x, ran, (axis,), combiner(kind, dtype))
    if dtype in (I32, U32):
        assert y.tolist() == [int(v) for v in np.array(expected, np.int64).astype(dtype)]
    else:
        assert ref.same_bits(y, ref.to_array(expected, dtype))
    return x, y


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
@pytest.mark.parametrize("layout, axis", CASES, ids=["row-axis1", "wgmma-axis1", "wgmma-axis0"])
def test_float_sums_follow_the_reduction_tree(dtype, layout, axis):
    x, y = check_reduction(dtype, layout, axis, "sum")
    if dtype == ref.F32 and layout is ROW:
        sequential = x[:, 0].copy()
        with np.errstate(invalid="ignore", over="ignore"):
            for column in range(1, x.shape[1]):
                sequential = sequential + x[:, column]
        assert not ref.same_bits(y, sequential), "the input should make the order matter"


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("layout, axis", [(ROW, 1), (ad.WGMMA, 0)], ids=["row-axis1", "wgmma-axis0"])
def test_float_extrema_propagate_nan_and_order_signed_zeros(kind, layout, axis):
    x = reduction_input(ref.BF16)
    x[:, :8] = [0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 0.0, -0.0]
    x[3, 5] = x[17, 40] = np.nan
    x[40:44, :] = -0.0
    x[44:48, :] = 0.0
    x[48:52, :] = np.where(RNG.random((4, 128)) < 0.5, 0.0, -0.0)
    check_reduction(ref.BF16, layout, axis, kind, x)


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_integer_reductions(kind):
    check_reduction(I32, ad.WGMMA, 0, kind)


@pytest.mark.parametrize("dtype", [ref.F32, ref.BF16, I32], ids=str)
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("layout", [ROW, ad.WGMMA, ad.strided(4)], ids=["row", "wgmma", "strided"])
def test_whole_tile_reductions_follow_the_tree(dtype, kind, layout):
    """`tile.sum()` (every axis) is a 0-d tile, here broadcast into eight elements (16 bytes at least)."""
    x = reduction_input(dtype)
    if dtype != I32 and kind != "sum":
        x[5, 7] = np.nan
    y = np.zeros(8, dtype)
    reduce_tile.interpret(x, y, LAYOUT=layout, KIND=kind, AXIS=None)
    module = reduce_tile.compile(x, y, LAYOUT=layout, KIND=kind, AXIS=None).module
    (reduce,) = [op for op in module.walk() if isinstance(op, ir.ReduceOp)]
    assert tuple(reduce.result.type.get_shape()) == ()
    (expected,) = tree_reference(x, layout_of(reduce.operand), (0, 1), combiner(kind, dtype))
    if dtype == I32:
        assert y.tolist() == [int(expected)] * 8
    else:
        assert ref.same_bits(y, ref.to_array([expected] * 8, dtype))


def in_layout(layout):
    """A RelayoutOp that infer-layouts would have marked: what `reduce` reads its layout from."""

    def build(value):
        op = ir.RelayoutOp(value, layout)
        op.attributes[INFERRED] = LayoutAttr(layout)
        return op

    return build


def test_a_reduction_without_its_operands_layout_is_an_error_at_the_op():
    with pytest.raises(ad.InterpretError, match="infer-layouts") as caught:
        run_op(lambda x, t: ir.ReduceOp(x, TileReduction.SUM, [1]), np.zeros((8, 16), np.float32))
    assert caught.value.location.line == LINE


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_unsigned_reductions_read_unsigned(kind):
    # Built as IR: the frontend's tiles may not hold uint32 for long, the contract still does.
    x = reduction_input(U32)
    x[:, :4] = [0, 1, 2**31, 2**32 - 1]
    relayout = in_layout(ad.WGMMA)

    def build(value, result_type):
        marked = relayout(value)
        return [marked, ir.ReduceOp(marked.result, TileReduction(kind), [0])]

    expected = tree_reference(x, ad.WGMMA, (0,), combiner(kind, U32))
    assert run_op(build, x).tolist() == expected


@ad.kernel(grid=(1,))
def reduce_splat(y, VALUE: ad.constexpr):
    out = ad.smem(y.shape, y.dtype)
    out[...] = ad.full((128, 256), VALUE, y.dtype).sum(axis=1)
    ad.fence_async_smem()
    ad.async_copy(out, y.at[...])
    ad.await_async_copy(0)


def test_a_splat_reduces_by_folding_its_value_once_per_element():
    # In bfloat16 each of the 255 additions of 0.1 rounds: above 16 every step adds a whole
    # 0.125, so the total (29.5) is far from 256 * 0.1.
    y = np.zeros(128, ml_dtypes.bfloat16)
    reduce_splat.interpret(y, VALUE=0.1)
    total = step = float(np.array(0.1).astype(ml_dtypes.bfloat16))
    for _ in range(255):
        total = ref.add(total, step, ref.BF16)
    assert (y.astype(np.float64) == total).all() and total == 29.5


# -- making tiles: constants, traced scalars, iota, broadcasts, layouts ------------------------------


@ad.kernel(grid=(2,))
def splat_program_id(y, DTYPE: ad.constexpr):
    out = ad.smem((64, 128), y.dtype)
    out[...] = ad.full((64, 128), ad.program_id(0) * 300 - 129, DTYPE)  # index -> i32 -> DTYPE
    ad.fence_async_smem()
    ad.async_copy(out, y.at[ad.ds(ad.program_id(0) * 64, 64), :])
    ad.await_async_copy(0)


@pytest.mark.parametrize(
    "dtype", [ad.float32, ad.bfloat16, ad.float16, ad.float8_e4m3fn, ad.int32, ad.int8, ad.int16], ids=str)
def test_a_traced_index_becomes_a_tile_of_any_dtype(dtype):
    y = np.zeros((128, 128), dtype.numpy)
    splat_program_id.interpret(y, DTYPE=dtype)
    for program, value in ((0, -129), (1, 171)):
        if dtype.is_float:
            expected = ref.round_fraction(Fraction(value), np.dtype(dtype.numpy))
        else:
            expected = int(np.array(value % 2**dtype.bits, f"uint{dtype.bits}").view(dtype.numpy))
        assert (y[64 * program : 64 * program + 64].astype(np.float64) == expected).all()


@ad.kernel(grid=(1,))
def made_tiles(x, y, z):
    buf = ad.smem(x.shape, x.dtype)
    indices = ad.smem(z.shape, z.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[...], buf, barrier=loaded)
    loaded.wait()
    t = buf[...]
    row_max = ad.maximum(t, -1.0).max(axis=1)
    shifted = (t - row_max[:, None]) * 0.5
    buf[...] = ad.fma(shifted, 2.0, ad.full((64, 128), 0.25, ad.float32)).to_layout(ad.WGMMA)
    rows = (ad.iota((64, 128), ad.int32, 0, layout=ad.WGMMA) * 1000).max(axis=1)
    columns = ad.iota((64, 128), ad.int32, 1, layout=ad.WGMMA)
    indices[...] = columns - rows[:, None]
    ad.fence_async_smem()
    ad.async_copy(buf, y.at[...])
    ad.async_copy(indices, z.at[...])
    ad.await_async_copy(0)


def test_iota_broadcasts_constants_and_relayouts_compose():
    x = (RNG.standard_normal((64, 128)) * 4).astype(np.float32)
    y, z = np.zeros_like(x), np.zeros((64, 128), np.int32)
    made_tiles.interpret(x, y, z)
    shifted = (x - np.maximum(x, np.float32(-1)).max(axis=1, keepdims=True)) * np.float32(0.5)
    # the product is exact: fma rounds once
    expected = (shifted.astype(np.float64) * 2 + 0.25).astype(np.float32)
    assert ref.same_bits(y, expected)
    assert np.array_equal(z, np.arange(128)[None, :] - np.arange(64)[:, None] * 1000)


@ad.kernel(grid=(1,))
def numpy_shaped(y):
    rows, columns = np.int64(4), np.int32(32)  # a shape worked out with numpy
    buf = ad.smem((rows, columns), ad.int32)
    total = ad.registers((rows, columns), ad.int32)
    total[...] = ad.zeros((rows, columns), ad.int32) + ad.iota(np.array([4, 32]), ad.int32, dim=1)
    buf[...] = total[...] + ad.full((rows, np.int16(1)), 100, ad.int32)
    ad.cta_barrier()
    ad.store(y.at[:, :], buf[...])


def test_shapes_of_numpy_integers_are_shapes():
    y = np.zeros((4, 32), np.int32)
    numpy_shaped.interpret(y)
    assert np.array_equal(y, np.broadcast_to(np.arange(32) + 100, (4, 32)))


@ad.kernel(grid=lambda x, y: (x.shape[0] // 64,))
def softmax(x, y):
    row = ad.program_id(0) * 64
    buf = ad.smem((64, 256), ad.float32)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(row, 64), :], buf, barrier=bar)
    bar.wait()
    t = buf[...]
    m = t.max(axis=1)
    e = ad.exp2((t - m[:, None]) * 1.4426950408889634)
    buf[...] = e / e.sum(axis=1)[:, None]
    ad.fence_async_smem()
    ad.async_copy(buf, y.at[ad.ds(row, 64), :])
    ad.await_async_copy(0)


def test_softmax():
    x = (RNG.standard_normal((128, 256)) * 3).astype(np.float32)
    y = np.zeros_like(x)
    softmax.interpret(x, y)
    expected = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, expected / expected.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-9)


@ad.kernel(grid=(1,))
def constant(y, VALUE: ad.constexpr):
    out = ad.smem(y.shape, y.dtype)
    out[...] = ad.full(y.shape, VALUE, y.dtype)
    ad.fence_async_smem()
    ad.async_copy(out, y.at[...])
    ad.await_async_copy(0)


@pytest.mark.parametrize("dtype, mantissa", [(ref.BF16, 7), (ref.F16, 10), (ref.F32, 23)], ids=str)
def test_a_constant_is_its_python_value_rounded_once(dtype, mantissa):
    y = np.zeros((64, 128), dtype)
    just_above_a_midpoint = 1 + 2.0 ** -(mantissa + 1) + 2.0**-40
    constant.interpret(y, VALUE=just_above_a_midpoint)
    assert (y.astype(np.float64) == 1 + 2.0**-mantissa).all()


# -- mutable registers ----------------------------------------------------------------------------


@ad.kernel(grid=(1,))
def unwritten_registers(y):
    total = ad.registers((64, 128), ad.float32)
    out = ad.smem((64, 128), ad.float32)
    out[...] = total[...] + 1.0  # never written


def test_reading_registers_before_any_write_is_an_error_at_the_read():
    with pytest.raises(ad.InterpretError, match="before anything was written") as caught:
        unwritten_registers.interpret(np.zeros(4, np.float32))
    assert caught.value.location.line == line_of(unwritten_registers.fn, "never written")
    assert (f"registers allocated at {__file__}:{line_of(unwritten_registers.fn, 'total = ')}"
            in str(caught.value))


def test_traced_scalars_combine_with_tiles_and_where_picks_between_numbers():
    x = (RNG.standard_normal((64, 128)) + 3).astype(np.float32)
    x[0, :3] = 3.0
    y = np.zeros((2, 6, 64, 128), np.float32)
    traced_scalars_with_tiles.interpret(x, y, 1.5)
    s = np.float32(1.5)
    for program in range(2):
        i = np.float32(program + 3)
        expected = (s - x, i / x, np.maximum(s, x), np.where(s < x, 1, 0), np.where(x > 3, i, -1),
                    np.where(i == x, s, 2.5))
        for position, values in enumerate(expected):
            assert np.array_equal(y[program, position], np.asarray(values, np.float32)), (program, position)
