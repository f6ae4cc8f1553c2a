"""Register tiles in the interpreter: every elementwise op on every dtype it is defined for,
reductions in the order of their tree, splats from traced scalars and the other ways of making
tiles, and the errors at the op's line (loads and stores: test_tile_access.py).

References are independent of the interpreter: elementwise results come from
numerics_reference.py (exact Fractions rounded by the textbook rule, one element at a time);
reductions from a walk of `hw.reduction_tree` written here, thread by thread in plain Python,
read back through `layout.holders`.

Kernels run through `tile_support.interpret` (the asyncdsl-level passes, then the interpreter).
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numerics_reference as ref
import numpy as np
import pytest
from tile_support import interpret
from xdsl.dialects import arith, func
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, IntegerAttr, ModuleOp, StringAttr, VectorType
from xdsl.interpreter import Interpreter
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import Block, Region

import asyncdsl as ad
from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.layout_attrs import INFERRED, LayoutAttr, layout_of
from asyncdsl.hw.fragments import TiledLayout
from asyncdsl.hw.options import TileReduction
from asyncdsl.hw.reduction_tree import reduction_tree
from asyncdsl.interpret.scalars import IndexArithFunctions
from asyncdsl.interpret.state import Cta, Launch
from asyncdsl.interpret.tiles import TileFunctions

RNG = np.random.default_rng(7)
I32, U32, BOOL = np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.bool_)


# -- elementwise ops, one op at a time -----------------------------------------------------------


def mlir(dtype: np.dtype):
    return dtypes.BOOL.mlir() if dtype == BOOL else dtypes.as_dtype(dtype).mlir()


LINE = 4242  # the source line the ops built here carry


def run_op(build, *inputs: np.ndarray, result: np.dtype | None = None):
    """Interpret the op made by `build(*block arguments, result type)` (or the ops: the last
    one's result is returned) on tile `inputs`, as `grid` registers the function sets; the
    result type (bool for comparisons) has `result`'s element type."""
    shape = inputs[0].shape
    block = Block(arg_types=[VectorType(mlir(a.dtype), shape) for a in inputs])
    ops = build(*block.args, VectorType(mlir(result if result is not None else inputs[0].dtype), shape))
    ops = ops if isinstance(ops, list) else [ops]
    op = ops[-1]
    for made in ops:
        made.location = FileLineColLoc(StringAttr("kernel.py"), IntAttr(LINE), IntAttr(0))
    block.add_ops([*ops, func.ReturnOp(*op.results)])
    function = func.FuncOp("f", ([a.type for a in block.args], [r.type for r in op.results]), Region(block))
    interpreter = Interpreter(ModuleOp([function]), index_bitwidth=32)
    interpreter.register_implementations(ArithFunctions())
    interpreter.register_implementations(FuncFunctions())
    interpreter.register_implementations(IndexArithFunctions(), override=True)
    warpgroup = Cta(Launch("k", (1, 1, 1), (1, 1, 1), 1, 0, ()), (0, 0, 0), 0, []).warpgroups[0]
    interpreter.register_implementations(TileFunctions(warpgroup), override=True)
    (out,) = interpreter.call_op("f", inputs)
    return out


def floats(dtype, count=113):
    return ref.float_values(dtype, count, RNG)[: 8 * 16].reshape(8, 16)


def ints(dtype):
    info = np.iinfo(dtype)
    values = np.concatenate([[0, 1, info.max, info.min, info.max - 1], RNG.integers(info.min, info.max, 123)])
    return values.astype(dtype).reshape(8, 16)


def binary(op_class):
    return lambda a, b, result_type: op_class(a, b)


def compare(op_class, names, predicate):
    properties = {"predicate": IntegerAttr(names.index(predicate), 64)}
    if op_class is arith.CmpfOp:
        properties["fastmath"] = arith.FastMathFlagsAttr("none")
    return lambda a, b, result_type: op_class.create(operands=[a, b], result_types=[result_type], properties=properties)


FLOAT_BINARY = [
    (arith.AddfOp, ref.add), (arith.SubfOp, ref.subtract), (arith.MulfOp, ref.multiply), (arith.DivfOp, ref.divide),
]


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
@pytest.mark.parametrize("op_class, reference", FLOAT_BINARY, ids=lambda v: getattr(v, "name", ""))
def test_float_arithmetic(dtype, op_class, reference):
    a, b = floats(dtype), RNG.permutation(floats(dtype).reshape(-1)).reshape(8, 16)
    expected = ref.reference_array(lambda x, y: reference(x, y, dtype), dtype, a, b).reshape(a.shape)
    assert ref.same_bits(run_op(binary(op_class), a, b), expected)


@pytest.mark.parametrize("dtype", ref.FLOATS, ids=str)
def test_float_fma_extrema_sign_ops_and_comparisons(dtype):
    a, b, c = floats(dtype), floats(dtype)[::-1], RNG.permutation(floats(dtype).reshape(-1)).reshape(8, 16)
    fma = run_op(lambda x, y, z, t: xmath.FmaOp(x, y, z), a, b, c)
    assert ref.same_bits(fma, ref.reference_array(lambda x, y, z: ref.fma(x, y, z, dtype), dtype, a, b, c).reshape(a.shape))
    for op_class, reference in ((arith.MaximumfOp, ref.maximum), (arith.MinimumfOp, ref.minimum)):
        assert ref.same_bits(run_op(binary(op_class), a, b), ref.reference_array(reference, dtype, a, b).reshape(a.shape))
    sign = 1 << (8 * dtype.itemsize - 1)
    assert np.array_equal(ref.bits(run_op(lambda x, t: arith.NegfOp(x), a)), ref.bits(a) ^ sign)
    assert np.array_equal(ref.bits(run_op(lambda x, t: xmath.AbsFOp(x), a)), ref.bits(a) & (sign - 1))
    for predicate in arith.CMPF_COMPARISON_OPERATIONS:
        result = run_op(compare(arith.CmpfOp, arith.CMPF_COMPARISON_OPERATIONS, predicate), a, b, result=BOOL)
        expected = [ref.compare(predicate, float(x), float(y)) for x, y in zip(a.flat, b.flat)]
        assert result.dtype == BOOL and result.reshape(-1).tolist() == expected, predicate


@pytest.mark.parametrize("dtype", [I32, U32], ids=str)
def test_integer_arithmetic_wraps_and_reads_signedness_from_the_op(dtype):
    a, b = ints(dtype), ints(dtype)[::-1]
    unsigned = lambda x: x.view(np.uint32).reshape(-1).tolist()  # noqa: E731
    signed = lambda x: x.view(np.int32).reshape(-1).tolist()  # noqa: E731
    wrapped = [
        (arith.AddiOp, lambda x, y: (x + y) % 2**32), (arith.SubiOp, lambda x, y: (x - y) % 2**32),
        (arith.MuliOp, lambda x, y: (x * y) % 2**32), (arith.AndIOp, int.__and__),
        (arith.OrIOp, int.__or__), (arith.XOrIOp, int.__xor__),
    ]
    for op_class, reference in wrapped:
        result = run_op(binary(op_class), a, b)
        assert result.dtype == dtype and unsigned(result) == [reference(x, y) for x, y in zip(unsigned(a), unsigned(b))]
    for op_class, view, pick in ((arith.MaxSIOp, signed, max), (arith.MinSIOp, signed, min),
                                 (arith.MaxUIOp, unsigned, max), (arith.MinUIOp, unsigned, min)):
        assert view(run_op(binary(op_class), a, b)) == [pick(x, y) for x, y in zip(view(a), view(b))]
    assert unsigned(run_op(lambda x, t: xmath.AbsIOp(x), a)) == [abs(x) % 2**32 for x in signed(a)]
    for predicate in arith.CMPI_COMPARISON_OPERATIONS:
        view = unsigned if predicate.startswith("u") else signed
        relation = {"eq": int.__eq__, "ne": int.__ne__, "lt": int.__lt__, "le": int.__le__,
                    "gt": int.__gt__, "ge": int.__ge__}[predicate.lstrip("su") if len(predicate) == 3 else predicate]
        result = run_op(compare(arith.CmpiOp, arith.CMPI_COMPARISON_OPERATIONS, predicate), a, b, result=BOOL)
        assert result.reshape(-1).tolist() == [relation(x, y) for x, y in zip(view(a), view(b))], predicate


def test_bool_tiles_combine_bitwise_and_select():
    m, n = RNG.integers(0, 2, (8, 16)).astype(bool), RNG.integers(0, 2, (8, 16)).astype(bool)
    for op_class, reference in ((arith.AndIOp, np.logical_and), (arith.OrIOp, np.logical_or), (arith.XOrIOp, np.logical_xor)):
        result = run_op(binary(op_class), m, n)
        assert result.dtype == BOOL and np.array_equal(result, reference(m, n))
    for dtype in (*ref.FLOATS, I32, U32, BOOL, ref.E4M3, np.dtype(np.int8)):
        a = ints(np.int8).astype(dtype) if dtype != BOOL else n
        b = a[::-1].copy()
        result = run_op(lambda c, x, y, t: arith.SelectOp(c, x, y), m, a, b)
        assert ref.same_bits(result, np.where(m, a, b))


CONVERSION_DTYPES = (*ref.FLOATS, ref.E4M3, ref.E5M2, I32, U32, *(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16)))


def conversion_ops(source: np.dtype, target: np.dtype) -> list[tuple[type, bool]]:
    """The ops converting `source` to `target`, each with whether it reads or writes signed."""
    if source in ref.FORMATS and target in ref.FORMATS:
        return [(arith.ExtFOp if target.itemsize > source.itemsize else arith.TruncFOp, True)]
    if source in ref.FORMATS:
        return [(arith.FPToSIOp, True), (arith.FPToUIOp, False)]
    if target in ref.FORMATS:
        return [(arith.SIToFPOp, True), (arith.UIToFPOp, False)]
    if source == BOOL or target.itemsize > source.itemsize:
        return [(arith.ExtSIOp, True), (arith.ExtUIOp, False)]
    return [(arith.TruncIOp, True)]


def converted(x, source: np.dtype, target: np.dtype, signed: bool):
    """The contract's conversion of one (non-NaN) element, as a Python number."""
    if source not in ref.FORMATS:
        if source == BOOL:
            value = -int(x) if signed else int(x)  # i1: true is -1 read signed
        else:
            value = int(np.array(x).view(f"{'int' if signed else 'uint'}{8 * source.itemsize}"))
        if target in ref.FORMATS:
            return ref.round_fraction(Fraction(value), target)
        return value % 2 ** (8 * target.itemsize)
    x = float(x)
    if target not in ref.FORMATS:
        bits = 8 * target.itemsize
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
        return min(max(math.trunc(x) if math.isfinite(x) else x, low), high) % 2**bits
    if math.isinf(x):  # overflow: inf, or float8's largest finite value
        return ref.round_fraction(ref.FORMATS[target][2] * 2, target) * (1 if x > 0 else -1)
    return ref.round_fraction(Fraction(x), target, negative_zero=math.copysign(1.0, x) < 0)


@pytest.mark.parametrize("source", (*CONVERSION_DTYPES, BOOL), ids=str)
def test_conversions(source):
    if source in ref.FORMATS:
        values = floats(source)
    else:
        values = RNG.integers(0, 2, (8, 16)).astype(bool) if source == BOOL else ints(source)
    nan = np.isnan(values.astype(np.float32))
    for target in CONVERSION_DTYPES:
        for op_class, signed in conversion_ops(source, target) if target != source else ():
            result = run_op(lambda x, t: op_class(x, t), values, result=target)
            expected = [converted(x, source, target, signed) for x in values[~nan]]
            if target in ref.FORMATS:
                assert ref.same_bits(result[~nan], ref.to_array(expected, target)), (op_class.name, target)
            else:
                assert result.dtype == target, (op_class.name, target)
                assert result[~nan].view(f"uint{8 * target.itemsize}").tolist() == expected, (op_class.name, target)
                assert (result[nan] == 0).all()
            if target in ref.FORMATS and target.itemsize <= source.itemsize:
                assert (ref.bits(result[nan]) == ref.CANONICAL_NAN[target]).all()


@pytest.mark.parametrize("approx", [False, True])
def test_approximate_functions(approx):
    x = np.array([[-2.5, -1.0, -0.0, 0.0, 0.5, 3.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 100.0, -150.0, 2.0, 7.0, 9.5]],
                 np.float32)
    flags = arith.FastMathFlagsAttr([arith.FastMathFlag.APPROX_FUNC] if approx else "none")
    functions = [(xmath.Exp2Op, np.exp2), (xmath.Log2Op, np.log2), (xmath.RsqrtOp, lambda v: 1 / np.sqrt(v))]
    if approx:
        functions += [(xmath.TanhOp, np.tanh), (xmath.SinOp, np.sin), (xmath.CosOp, np.cos)]
    tiny = np.finfo(np.float32).tiny
    for op_class, function in functions:
        result = run_op(lambda v, t: op_class(v, flags), x)
        source = np.where(np.abs(x) < tiny, np.copysign(0, x), x) if approx else x
        with np.errstate(all="ignore"):
            expected = function(source.astype(np.float64)).astype(np.float32)
        if approx:
            expected = np.where(np.abs(expected) < tiny, np.copysign(0, expected), expected).astype(np.float32)
        expected = np.where(np.isnan(expected), np.uint32(0x7FFFFFFF).view(np.float32), expected)
        assert ref.same_bits(result, expected), op_class.name


def test_arithmetic_the_contract_does_not_define_is_an_error_at_the_op():
    a = np.zeros((8, 16), ml_dtypes.float8_e4m3fn)
    with pytest.raises(ad.InterpretError) as caught:
        run_op(binary(arith.AddfOp), a, a)
    assert caught.value.location.line == LINE
    assert "arith.addf on float8_e4m3fn values" in str(caught.value) and "warpgroup 0" in str(caught.value)
    with pytest.raises(ad.InterpretError, match="register tiles hold the dtypes"):
        run_op(binary(arith.AddfOp), a.astype(np.float64), a.astype(np.float64))


def test_a_reduction_without_its_operands_layout_is_an_error_at_the_op():
    with pytest.raises(ad.InterpretError, match="infer-layouts") as caught:
        run_op(lambda x, t: ir.ReduceOp(x, TileReduction.SUM, [1]), np.zeros((8, 16), np.float32))
    assert caught.value.location.line == LINE


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
                total = [[combine(x, y) for x, y in zip(a, b)] for a, b in zip(total, threads[warp * 32 + lane])]
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
        return ints(dtype).reshape(-1)[RNG.integers(0, 128, shape)]
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
    module = interpret(reduce_tile, x, y, LAYOUT=layout, KIND=kind, AXIS=axis)
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


def in_layout(layout):
    """A RelayoutOp that infer-layouts would have marked: what `reduce` reads its layout from."""

    def build(value):
        op = ir.RelayoutOp(value, layout)
        op.attributes[INFERRED] = LayoutAttr(layout)
        return op

    return build


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
    out[...] = ad.full((64, 256), VALUE, y.dtype).sum(axis=1)
    ad.fence_async_smem()
    ad.async_copy(out, y.at[...])
    ad.await_async_copy(0)


def test_a_splat_reduces_by_folding_its_value_once_per_element():
    # In bfloat16, 0.1 added to itself 255 times stalls where the step falls below half an ulp.
    y = np.zeros(64, ml_dtypes.bfloat16)
    interpret(reduce_splat, y, VALUE=0.1)
    total = step = float(np.array(0.1).astype(ml_dtypes.bfloat16))
    for _ in range(255):
        total = ref.add(total, step, ref.BF16)
    assert (y.astype(np.float64) == total).all() and total != 256 * step


# -- making tiles: constants, traced scalars, iota, broadcasts, layouts ------------------------------


@ad.kernel(grid=(2,))
def splat_program_id(y, DTYPE: ad.constexpr):
    out = ad.smem((64, 128), y.dtype)
    out[...] = ad.full((64, 128), ad.program_id(0) * 300 - 129, DTYPE)  # index -> i32 -> DTYPE
    ad.fence_async_smem()
    ad.async_copy(out, y.at[ad.ds(ad.program_id(0) * 64, 64), :])
    ad.await_async_copy(0)


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.float16, ad.float8_e4m3fn, ad.int32, ad.int8, ad.int16], ids=str)
def test_a_traced_index_becomes_a_tile_of_any_dtype(dtype):
    y = np.zeros((128, 128), dtype.numpy)
    interpret(splat_program_id, y, DTYPE=dtype)
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
    interpret(made_tiles, x, y, z)
    shifted = (x - np.maximum(x, np.float32(-1)).max(axis=1, keepdims=True)) * np.float32(0.5)
    expected = (shifted.astype(np.float64) * 2 + 0.25).astype(np.float32)  # the product is exact: fma rounds once
    assert ref.same_bits(y, expected)
    assert np.array_equal(z, np.arange(128)[None, :] - np.arange(64)[:, None] * 1000)


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
    interpret(softmax, x, y)
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
    interpret(constant, y, VALUE=just_above_a_midpoint)
    assert (y.astype(np.float64) == 1 + 2.0**-mantissa).all()
