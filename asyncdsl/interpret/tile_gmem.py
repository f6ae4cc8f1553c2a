"""The interpreter's register-tile accesses to GMEM windows: `asyncdsl.load_gmem`, `store_gmem`,
and gathers and scatters, `asyncdsl.gather_gmem` and `scatter_gmem` (two elements of a scatter
naming one array element are an error: the GPU leaves that element undefined).

Element e of the tile is the array's element at `starts + e` (squeezed dims at their index), or
for a gather at its index tiles' elements e;
elements outside the array, or where the mask is false, are never touched: a load gives the op's
`other` there, a store leaves the array alone (docs/register-tiles.md, Memory).  GMEM accesses
are not race-checked (README, Known limits).
"""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import InterpretError
from asyncdsl.interpret.diagnosis import diagnosed
from asyncdsl.interpret import numerics
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.memory import GlobalArgument
from asyncdsl.interpret.operands import operand_values, vector_of
from asyncdsl.interpret.tiles import element_dtype


def _window(op, values: dict) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The array indices of every element of the window (tile-shaped, one per array dim) and
    where the element may be touched (inside the array, and the op's mask if it has one)."""
    shape = tuple(op.gmem.type.get_shape())
    sizes = tuple(op.sizes.get_values())
    tile_shape = tuple(size for size in sizes if size != ir.SQUEEZED)
    grids = iter(np.indices(tile_shape, dtype=np.int64)) if tile_shape else iter(())
    indices, allowed = [], np.ones(tile_shape, dtype=bool)
    for start, size, extent in zip(op.starts, sizes, shape):
        first = values[start].value.data
        index = np.full(tile_shape, first, np.int64) if size == ir.SQUEEZED else first + next(grids)
        allowed &= (index >= 0) & (index < extent)
        indices.append(np.where(allowed, index, 0))
    if op.mask is not None:
        allowed &= np.asarray(values[op.mask], dtype=bool)
    return tuple(np.where(allowed, i, 0) for i in indices), allowed


def _indexed(op, values: dict, extents: tuple[int, ...], shape: tuple[int, ...]):
    """A gather's or scatter's array indices (each in bounds, 0 where the element is not moved)
    and where the element moves: every index inside its dim, and the mask if there is one."""
    indices = [np.broadcast_to(np.asarray(values[index], np.int64), shape) for index in op.indices]
    allowed = np.ones(shape, dtype=bool)
    for index, extent in zip(indices, extents):
        allowed &= (index >= 0) & (index < extent)
    if op.mask is not None:
        allowed &= np.asarray(values[op.mask], dtype=bool)
    return tuple(np.where(allowed, i, 0) for i in indices), allowed


def _read(op, array: np.ndarray, indices, allowed: np.ndarray) -> np.ndarray:
    """The elements at `indices` where `allowed`, the op's `other` elsewhere."""
    value = np.asarray(op.other.value.data)
    # A NaN is the canonical NaN, as for every float constant (`tiles.tile_array`).
    other = numerics.canonical_nan(array.dtype) if np.isnan(value) else value.astype(array.dtype)
    return np.where(allowed, array[indices], other).astype(array.dtype)


def _write(array: np.ndarray, indices, allowed: np.ndarray, tile) -> None:
    """`tile` (broadcast to the elements' shape) into `array` at `indices` where `allowed`."""
    tile = np.broadcast_to(np.asarray(tile, dtype=array.dtype), allowed.shape)
    array[tuple(i[allowed] for i in indices)] = tile[allowed]


def _array(argument: GlobalArgument, op, tile, writes: str | None = None) -> np.ndarray:
    """The argument's elements, as the array the window indexes (a view: stores write through);
    `writes`: the op that writes them (refused on a read-only array)."""
    dtype = element_dtype(tile.type, op)
    raw = argument.raw if writes is None else argument.writable(writes)
    return raw.view(dtype).reshape(tuple(op.gmem.type.get_shape()))


@register_impls
class TileGmemFunctions(WarpgroupFunctions):
    """Register tiles to and from GMEM windows, executed by `self.warpgroup`."""

    @impl(ir.LoadGmemOp)
    @diagnosed
    def run_load_gmem(self, interpreter: Interpreter, op: ir.LoadGmemOp, args: PythonValues):
        values = operand_values(op, args)
        array = _array(values[op.gmem], op, op.result)
        return (_read(op, array, *_window(op, values)),)

    @impl(ir.GatherGmemOp)
    @diagnosed
    def run_gather_gmem(self, interpreter: Interpreter, op: ir.GatherGmemOp, args: PythonValues):
        values = operand_values(op, args)
        array = _array(values[op.gmem], op, op.result)
        return (_read(op, array, *_indexed(op, values, array.shape, tuple(op.result.type.get_shape()))),)

    @impl(ir.ScatterGmemOp)
    @diagnosed
    def run_scatter_gmem(self, interpreter: Interpreter, op: ir.ScatterGmemOp, args: PythonValues):
        values = operand_values(op, args)
        array = _array(values[op.gmem], op, op.value, "a scatter")
        shape = tuple(vector_of(op.value).get_shape())
        indices, allowed = _indexed(op, values, array.shape, shape)
        written = (np.ravel_multi_index(tuple(i[allowed] for i in indices), array.shape) if array.ndim
                   else np.zeros(0))
        if len(np.unique(written)) < len(written):
            raise InterpretError(
                "two elements of a scatter write the same array element (their indices are equal): on the "
                "GPU which one lands is undefined; mask all but one off"
            )
        _write(array, indices, allowed, values[op.value])
        return ()

    @impl(ir.StoreGmemOp)
    @diagnosed
    def run_store_gmem(self, interpreter: Interpreter, op: ir.StoreGmemOp, args: PythonValues):
        values = operand_values(op, args)
        array = _array(values[op.gmem], op, op.value, "a store")
        _write(array, *_window(op, values), values[op.value])
        return ()
