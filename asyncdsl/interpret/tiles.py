"""The interpreter's register tiles: what a tile is, and the tile ops that make, reshape and
reduce tiles (`asyncdsl.full`, `splat`, `iota`, `broadcast_in_dim`, `relayout`, `reduce`).

A tile's value is a numpy array of its logical shape and dtype (ml_dtypes for bfloat16 and
float8, bool for i1), whatever its layout: a layout says which thread holds which element, which
changes no element, so making, broadcasting and relayouting tiles is plain numpy.  Reductions are
the exception: a float result depends on the order, so `reduce` walks `hw.reduction_tree` over
the layout infer-layouts recorded, for all 128 threads at once, exactly as the GPU does.  The
element arithmetic is `numerics` (docs/register-tiles.md); elementwise math is `tile_math`.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import FloatAttr, VectorType
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.ir import Attribute, Operation

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.layout_attrs import layout_of
from asyncdsl.errors import ArgumentError, InterpretError
from asyncdsl.hw.fragments import SplatLayout
from asyncdsl.hw.options import TileReduction
from asyncdsl.hw.reduction_tree import ReductionTree, reduction_tree
from asyncdsl.hw.tiling import THREADS, WARP_LANES, WARPS
from asyncdsl.interpret import numerics
from asyncdsl.interpret.diagnosis import diagnosed
from asyncdsl.interpret.functions import WarpgroupFunctions

# docs/register-tiles.md, "Dtypes": what a tile holds, and what it computes on.
FLOATS = frozenset(np.dtype(t) for t in (np.float32, ml_dtypes.bfloat16, np.float16))
INTEGERS = frozenset(np.dtype(t) for t in (np.int32, np.uint32))
BITWISE = INTEGERS | {np.dtype(np.bool_)}
TILE_DTYPES = (
    FLOATS | BITWISE
    | {np.dtype(t)
       for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.int8, np.uint8, np.int16, np.uint16)}
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
        raise InterpretError(
            f"{op.name}: register tiles hold the dtypes docs/register-tiles.md lists, not {element}")
    return dtype


def check_dtype(op: Operation, operand: int, allowed: frozenset | None) -> None:
    """Raise an InterpretError unless `op`'s operand `operand` has a dtype in `allowed` (None:
    any a tile holds)."""
    dtype = element_dtype(op.operands[operand].type, op)
    if allowed is not None and dtype not in allowed:
        names = ", ".join(sorted(map(str, allowed)))  # numpy's names are asyncdsl's
        raise InterpretError(
            f"{op.name} on {dtype} values: docs/register-tiles.md defines it for {names} only")


def tile_array(value, type_: Attribute, op: Operation) -> np.ndarray:
    """An operand as an array: a tile is one already, a scalar attribute becomes a 0-d array."""
    if isinstance(value, np.ndarray):
        return value
    dtype = element_dtype(type_, op)
    if isinstance(value, FloatAttr):
        # xDSL rounds a float attribute to its type when it is made, so this is exact.
        exact = np.array(value.value.data, np.float64)
        return numerics.canonical_nan(dtype) if np.isnan(exact) else exact.astype(dtype)
    return numerics.int_to_int(np.array(value.value.data, np.int64), dtype)


# How `reduce` combines two partial results: the elementwise op, in the tile's dtype.
_REDUCTION_STEPS = {
    TileReduction.SUM: numerics.add, TileReduction.MAX: numerics.maximum, TileReduction.MIN: numerics.minimum,
}


@functools.lru_cache(maxsize=256)
def _tree(layout, shape: tuple[int, ...], axes: tuple[int, ...]) -> ReductionTree:
    """`reduction_tree`, derived once per layout, shape and axes: a loop reduces the same tile
    in every iteration."""
    return reduction_tree(layout, shape, axes)


def _tree_reduce(values: np.ndarray, layout, axes: tuple[int, ...], step,
                 result_shape: tuple[int, ...]) -> np.ndarray:
    """`values` reduced in the order of `hw.reduction_tree` (its docstring is the walk)."""
    tree = _tree(layout, values.shape, axes)
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
    if isinstance(tree.result, SplatLayout):  # a strided tile: every thread ends with the total
        return np.broadcast_to(partial.reshape(THREADS, -1)[0, 0], result_shape)
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
class TileFunctions(WarpgroupFunctions):
    """The tile ops: making, broadcasting, relayouting and reducing register tiles."""

    @impl(ir.FullOp)
    @diagnosed
    def run_full(self, interpreter: Interpreter, op: ir.FullOp, args: PythonValues):
        value = tile_array(op.value, op.result.type, op)
        return (np.broadcast_to(value, tuple(op.result.type.get_shape())),)

    @impl(ir.SplatOp)
    @diagnosed
    def run_splat(self, interpreter: Interpreter, op: ir.SplatOp, args: PythonValues):
        value = tile_array(args[0], op.scalar.type, op)
        return (np.broadcast_to(value, tuple(op.result.type.get_shape())),)

    @impl(ir.IotaOp)
    @diagnosed
    def run_iota(self, interpreter: Interpreter, op: ir.IotaOp, args: PythonValues):
        shape = tuple(op.result.type.get_shape())
        dim = op.dim.value.data
        index = np.arange(shape[dim], dtype=np.int64).reshape(
            [-1 if d == dim else 1 for d in range(len(shape))])
        return (np.broadcast_to(numerics.int_to_int(index, element_dtype(op.result.type, op)), shape),)

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
        check_dtype(op, 0, FLOATS | INTEGERS)
        (values,) = args
        axes = tuple(op.axes.get_values())
        step = _REDUCTION_STEPS[TileReduction(op.kind.data)]
        layout = layout_of(op.operand)
        if layout is None:
            raise InterpretError(
                f"{op.name} needs the operand's layout, which infer-layouts records; it did not run")
        if isinstance(layout, SplatLayout):
            count = int(np.prod([values.shape[a] for a in axes]))
            return (_splat_reduce(values, tuple(op.result.type.get_shape()), count, step),)
        return (_tree_reduce(values, layout, axes, step, tuple(op.result.type.get_shape())),)
