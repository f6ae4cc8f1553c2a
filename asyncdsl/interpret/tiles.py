"""The interpreter's register tiles: the tile ops and `arith`/`math` on `vector` values.

A tile's value is a numpy array of its logical shape and dtype (ml_dtypes for bfloat16 and
float8, bool for i1), whatever its layout: a layout says which thread holds which element, which
changes no element, so making, broadcasting and relayouting tiles is plain numpy.  Reductions are
the exception: a float result depends on the order, so `reduce` walks `hw.reduction_tree` over
the layout infer-layouts recorded, for all 128 threads at once, exactly as the GPU does.  The
element arithmetic is `hw.numerics`, per docs/register-tiles.md; where an op reads integers
signed or unsigned, the IR op says which (`maxsi`/`maxui`, `sitofp`/`uitofp`, the predicate),
as in MLIR, never the tile's dtype.

xDSL runs one implementation per op class, and `arith` also carries index arithmetic, so these
implementations are registered over `ArithFunctions` and `IndexArithFunctions` (`grid.py`) and
hand index values and i1 conditions back to them: `scalars.py` stays the owner of index
semantics.  Other scalars (the i32 and float casts the frontend makes on the way to a splat)
are computed here as 0-d arrays, as the lowering computes them as one register.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType, VectorType
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.ir import Attribute, Operation

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.layout_attrs import layout_of
from asyncdsl.errors import ArgumentError, InterpretError
from asyncdsl.hw import numerics
from asyncdsl.hw.fragments import SplatLayout
from asyncdsl.hw.options import TileReduction
from asyncdsl.hw.reduction_tree import reduction_tree
from asyncdsl.hw.tiling import THREADS, WARP_LANES, WARPS
from asyncdsl.interpret.diagnosis import diagnosed
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.scalars import IndexArithFunctions

# The owners of index arithmetic, for the ops handed back to them (the ones used are stateless:
# the launch's own IndexArithFunctions keeps its constants).
_ARITH = ArithFunctions()
_INDEX_ARITH = IndexArithFunctions()

# docs/register-tiles.md, "Dtypes": what a tile holds, and what it computes on.
FLOATS = frozenset(np.dtype(t) for t in (np.float32, ml_dtypes.bfloat16, np.float16))
INTEGERS = frozenset(np.dtype(t) for t in (np.int32, np.uint32))
BITWISE = INTEGERS | {np.dtype(np.bool_)}
TILE_DTYPES = (
    FLOATS | BITWISE
    | {np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.int8, np.uint8, np.int16, np.uint16)}
)
FLOAT32 = frozenset({np.dtype(np.float32)})


def element_dtype(type_: Attribute, op: Operation) -> np.dtype:
    """The numpy dtype of a tile's (or a non-index scalar's) element type."""
    element = type_.element_type if isinstance(type_, VectorType) else type_
    try:
        dtype = dtypes.from_mlir(element).numpy
    except ArgumentError:
        dtype = None
    if dtype not in TILE_DTYPES:
        raise InterpretError(f"{op.name}: register tiles hold the dtypes docs/register-tiles.md lists, not {element}")
    return dtype


def _array(value, type_: Attribute, op: Operation) -> np.ndarray:
    """An operand as an array: a tile is one already, a scalar attribute becomes a 0-d array."""
    if isinstance(value, np.ndarray):
        return value
    dtype = element_dtype(type_, op)
    if isinstance(value, FloatAttr):
        # xDSL rounds a float attribute to its type when it is made, so this is exact.
        exact = np.array(value.value.data, np.float64)
        return numerics.canonical_nan(dtype) if np.isnan(exact) else exact.astype(dtype)
    return numerics.int_to_int(np.array(value.value.data, np.int64), dtype, signed=True)


def _scalar(value: np.ndarray, type_: Attribute):
    """A 0-d array as the interpreter holds scalars (xDSL's attributes)."""
    if numerics.is_float(value.dtype):
        return FloatAttr(float(value), type_)
    return IntegerAttr(int(value), type_)


def _is_index_op(op: Operation) -> bool:
    """Index arithmetic or conditions: every operand and result an index or an i1."""
    return all(
        isinstance(v.type, IndexType) or (isinstance(v.type, IntegerType) and v.type.width.data == 1)
        for v in (*op.operands, *op.results)
    )


def _check_dtype(op: Operation, operand: int, allowed: frozenset | None) -> None:
    dtype = element_dtype(op.operands[operand].type, op)
    if allowed is not None and dtype not in allowed:
        names = ", ".join(sorted(map(str, allowed)))  # numpy's names are asyncdsl's
        raise InterpretError(f"{op.name} on {dtype} values: docs/register-tiles.md defines it for {names} only")


Compute = Callable[..., np.ndarray]


def _elementwise(op_type: type[Operation], compute: Compute, allowed: frozenset | None, scalar=None, checked: int = 0):
    """The implementation of an elementwise `arith`/`math` op: `compute(op, *arrays)` on tiles
    and non-index scalars, after checking operand `checked` has a dtype in `allowed` (None: any
    tile dtype); index arithmetic goes to `scalar`, the implementation that owns it."""

    @impl(op_type)
    @diagnosed
    def run(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        handed_back = self.index_ops.get(op)
        if handed_back is None:  # decided once per op: index loops run these ops most
            handed_back = self.index_ops[op] = scalar is not None and _is_index_op(op)
        if handed_back:
            return scalar(interpreter, op, args).values
        result_type = op.results[0].type
        _check_dtype(op, checked, allowed)
        arrays = [_array(value, operand.type, op) for value, operand in zip(args, op.operands)]
        result = compute(op, *arrays)
        return (result if isinstance(result_type, VectorType) else _scalar(result, result_type),)

    return run


def _result_dtype(op: Operation) -> np.dtype:
    return element_dtype(op.results[0].type, op)


def _binary(function: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Compute:
    return lambda op, a, b: np.asarray(function(a, b))


def _predicate(names: tuple[str, ...]) -> Compute:
    return lambda op, a, b: numerics.compare(names[op.predicate.value.data], a, b)


def _approximate(name: str) -> Compute:
    # `afn` is the user's approx=True: the `.ftz` forms (docs/register-tiles.md).
    return lambda op, x: numerics.approximate(name, x, ftz=arith.FastMathFlag.APPROX_FUNC in op.fastmath.data)


def _reduction_step(kind: TileReduction, dtype: np.dtype) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """How `reduce` combines two partial results: the elementwise op of the tile's dtype."""
    if kind == TileReduction.SUM:
        return numerics.add
    signed = dtype != np.uint32
    return functools.partial(numerics.maximum if kind == TileReduction.MAX else numerics.minimum, signed=signed)


def _tree_reduce(values: np.ndarray, layout, axes: tuple[int, ...], step) -> np.ndarray:
    """`values` reduced in the order of `hw.reduction_tree` (its docstring is the walk)."""
    tree = reduction_tree(layout, values.shape, axes)
    coordinates = layout.coordinates(values.shape)  # (threads, *registers, rank)
    held = values[tuple(np.moveaxis(coordinates, -1, 0))].reshape(THREADS, -1, layout.vector_length)
    terms = np.array(tree.register_terms)  # (result registers, folded registers)
    partial = held[:, terms[:, 0]]  # (threads, result registers, vector lanes)
    for column in range(1, terms.shape[1]):
        partial = step(partial, held[:, terms[:, column]])
    if tree.fold_vector:
        folded = partial[..., 0]
        for lane in range(1, partial.shape[-1]):
            folded = step(folded, partial[..., lane])
        partial = folded[..., None]
    for mask in tree.lane_xors:  # own value first, then lane ^ mask's
        partial = step(partial, partial[np.arange(THREADS) ^ mask])
    if tree.warp_groups:
        by_warp = partial.reshape(WARPS, WARP_LANES, *partial.shape[1:])
        combined = by_warp.copy()
        for group in tree.warp_groups:
            total = by_warp[group[0]]
            for warp in group[1:]:
                total = step(total, by_warp[warp])
            combined[list(group)] = total
        partial = combined.reshape(partial.shape)
    result = np.empty(tree.result_shape, values.dtype)
    places = tree.result.coordinates(tree.result_shape)
    result[tuple(np.moveaxis(places, -1, 0))] = partial.reshape(places.shape[:-1])
    return result


def _splat_reduce(values: np.ndarray, shape: tuple[int, ...], count: int, step) -> np.ndarray:
    """A splat tile reduced over `count` elements: its one value folded with itself, left to
    right, once per element after the first (docs/register-tiles.md)."""
    value = values[(0,) * values.ndim]
    total = value
    for _ in range(count - 1):
        following = step(total, value)
        if following.tobytes() == total.tobytes():
            break  # every later step folds the same value into the same total
        total = following
    return np.broadcast_to(total, shape)


@register_impls
@dataclass
class TileFunctions(WarpgroupFunctions):
    """Register tiles: the `asyncdsl` tile ops, and `arith`/`math` on tiles (registered over
    xDSL's and `scalars.py`'s `arith`, which keep index arithmetic: `index_ops` remembers which
    ops go back to them)."""

    index_ops: dict[Operation, bool] = field(default_factory=dict)

    # -- the tile ops ------------------------------------------------------------------------------
    @impl(ir.FullOp)
    @diagnosed
    def run_full(self, interpreter: Interpreter, op: ir.FullOp, args: PythonValues):
        value = _array(op.value, op.result.type, op)
        return (np.broadcast_to(value, tuple(op.result.type.get_shape())),)

    @impl(ir.SplatOp)
    @diagnosed
    def run_splat(self, interpreter: Interpreter, op: ir.SplatOp, args: PythonValues):
        value = _array(args[0], op.scalar.type, op)
        return (np.broadcast_to(value, tuple(op.result.type.get_shape())),)

    @impl(ir.IotaOp)
    @diagnosed
    def run_iota(self, interpreter: Interpreter, op: ir.IotaOp, args: PythonValues):
        shape = tuple(op.result.type.get_shape())
        dim = op.dim.value.data
        index = np.arange(shape[dim], dtype=np.int64).reshape([-1 if d == dim else 1 for d in range(len(shape))])
        return (np.broadcast_to(numerics.int_to_int(index, _result_dtype(op), signed=True), shape),)

    @impl(ir.BroadcastInDimOp)
    @diagnosed
    def run_broadcast_in_dim(self, interpreter: Interpreter, op: ir.BroadcastInDimOp, args: PythonValues):
        shape = tuple(op.result.type.get_shape())
        dims = tuple(op.dims.get_values())
        (operand,) = args
        placed = [operand.shape[dims.index(d)] if d in dims else 1 for d in range(len(shape))]
        return (np.broadcast_to(operand.reshape(placed), shape),)

    @impl(ir.RelayoutOp)
    @diagnosed
    def run_relayout(self, interpreter: Interpreter, op: ir.RelayoutOp, args: PythonValues):
        return (args[0],)  # threads trade elements; the tile is the same

    @impl(ir.ReduceOp)
    @diagnosed
    def run_reduce(self, interpreter: Interpreter, op: ir.ReduceOp, args: PythonValues):
        _check_dtype(op, 0, FLOATS | INTEGERS)
        (values,) = args
        axes = tuple(op.axes.get_values())
        step = _reduction_step(TileReduction(op.kind.data), values.dtype)
        layout = layout_of(op.operand)
        if layout is None:
            raise InterpretError(f"{op.name} needs the operand's layout, which infer-layouts records; it did not run")
        if isinstance(layout, SplatLayout):
            count = int(np.prod([values.shape[a] for a in axes]))
            return (_splat_reduce(values, tuple(op.result.type.get_shape()), count, step),)
        return (_tree_reduce(values, layout, axes, step),)

    # -- float arithmetic --------------------------------------------------------------------------
    run_addf = _elementwise(arith.AddfOp, _binary(numerics.add), FLOATS, _ARITH.run_addf)
    run_subf = _elementwise(arith.SubfOp, _binary(numerics.subtract), FLOATS, _ARITH.run_subf)
    run_mulf = _elementwise(arith.MulfOp, _binary(numerics.multiply), FLOATS, _ARITH.run_mulf)
    run_divf = _elementwise(arith.DivfOp, _binary(numerics.divide), FLOATS)
    run_negf = _elementwise(arith.NegfOp, lambda op, x: numerics.negate(x), FLOATS)
    run_absf = _elementwise(xmath.AbsFOp, lambda op, x: numerics.absolute(x), FLOATS)
    run_fma = _elementwise(xmath.FmaOp, lambda op, a, b, c: numerics.fma(a, b, c), FLOATS)
    run_maximumf = _elementwise(arith.MaximumfOp, _binary(numerics.maximum), FLOATS, _ARITH.run_maximumf)
    run_minimumf = _elementwise(arith.MinimumfOp, _binary(numerics.minimum), FLOATS, _ARITH.run_minimumf)
    run_cmpf = _elementwise(arith.CmpfOp, _predicate(arith.CMPF_COMPARISON_OPERATIONS), FLOATS, _ARITH.run_cmpf)

    # -- integer and bool arithmetic -----------------------------------------------------------------
    run_addi = _elementwise(arith.AddiOp, _binary(numerics.add), INTEGERS, _ARITH.run_addi)
    run_subi = _elementwise(arith.SubiOp, _binary(numerics.subtract), INTEGERS, _ARITH.run_subi)
    run_muli = _elementwise(arith.MuliOp, _binary(numerics.multiply), INTEGERS, _ARITH.run_muli)
    run_andi = _elementwise(arith.AndIOp, _binary(np.bitwise_and), BITWISE, _ARITH.run_andi)
    run_ori = _elementwise(arith.OrIOp, _binary(np.bitwise_or), BITWISE, _ARITH.run_ori)
    run_xori = _elementwise(arith.XOrIOp, _binary(np.bitwise_xor), BITWISE, _ARITH.run_xori)
    run_absi = _elementwise(xmath.AbsIOp, lambda op, x: numerics.absolute(x), INTEGERS)
    run_maxsi = _elementwise(
        arith.MaxSIOp, _binary(functools.partial(numerics.maximum, signed=True)), INTEGERS, _INDEX_ARITH.run_maxsi
    )
    run_minsi = _elementwise(
        arith.MinSIOp, _binary(functools.partial(numerics.minimum, signed=True)), INTEGERS, _INDEX_ARITH.run_minsi
    )
    run_maxui = _elementwise(arith.MaxUIOp, _binary(functools.partial(numerics.maximum, signed=False)), INTEGERS)
    run_minui = _elementwise(arith.MinUIOp, _binary(functools.partial(numerics.minimum, signed=False)), INTEGERS)
    run_cmpi = _elementwise(arith.CmpiOp, _predicate(arith.CMPI_COMPARISON_OPERATIONS), INTEGERS, _ARITH.run_cmpi)
    run_select = _elementwise(
        arith.SelectOp, lambda op, mask, a, b: np.where(mask, a, b), None, _ARITH.run_select, checked=1
    )

    # -- conversions: any tile dtype ---------------------------------------------------------------
    run_extf = _elementwise(arith.ExtFOp, lambda op, x: numerics.float_to_float(x, _result_dtype(op)), None)
    run_truncf = _elementwise(arith.TruncFOp, lambda op, x: numerics.float_to_float(x, _result_dtype(op)), None)
    run_fptosi = _elementwise(arith.FPToSIOp, lambda op, x: numerics.float_to_int(x, _result_dtype(op), True), None)
    run_fptoui = _elementwise(arith.FPToUIOp, lambda op, x: numerics.float_to_int(x, _result_dtype(op), False), None)
    run_sitofp = _elementwise(arith.SIToFPOp, lambda op, x: numerics.int_to_float(x, _result_dtype(op), True), None)
    run_uitofp = _elementwise(arith.UIToFPOp, lambda op, x: numerics.int_to_float(x, _result_dtype(op), False), None)
    run_extsi = _elementwise(arith.ExtSIOp, lambda op, x: numerics.int_to_int(x, _result_dtype(op), True), None)
    run_extui = _elementwise(arith.ExtUIOp, lambda op, x: numerics.int_to_int(x, _result_dtype(op), False), None)
    # Truncation keeps the low bits, however the source is read.
    run_trunci = _elementwise(arith.TruncIOp, lambda op, x: numerics.int_to_int(x, _result_dtype(op), True), None)

    # -- approximate functions (float32) -------------------------------------------------------------
    run_exp2 = _elementwise(xmath.Exp2Op, _approximate("exp2"), FLOAT32)
    run_log2 = _elementwise(xmath.Log2Op, _approximate("log2"), FLOAT32)
    run_rsqrt = _elementwise(xmath.RsqrtOp, _approximate("rsqrt"), FLOAT32)
    run_tanh = _elementwise(xmath.TanhOp, _approximate("tanh"), FLOAT32)
    run_sin = _elementwise(xmath.SinOp, _approximate("sin"), FLOAT32)
    run_cos = _elementwise(xmath.CosOp, _approximate("cos"), FLOAT32)
