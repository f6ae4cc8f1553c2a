"""`infer-layouts`: give every register tile a register layout.

Expects: register tiles as traced (`vector` values made by `asyncdsl` tile ops, `arith`/`math`
on vectors), some with the layout the user gave (`layout = ...` on the op that makes them,
`asyncdsl.relayout`).
Guarantees: every op that makes a tile carries its layout as the discardable attribute
`asyncdsl.layout`, the layouts hold the tiles' shapes, elementwise ops see one layout (or splats),
broadcasts and reductions move no data; or a `LayoutError` at the user's line says what clashed.

The rules:

- A layout the user gave is used as given.  `full` and `splat` without one are *splats*: one
  register per thread standing for every element, which combines with any layout for free.
- The operands and result of an elementwise op (and a register ref with what is read from and
  written to it, a GMEM window's tile with its mask) share one layout: tiles that meet are a
  *class* (union-find) and get a layout together.  Two different given layouts in one class are
  an error; `tile.to_layout(...)` is the way to combine them.
- A class without a given layout takes, in this order (each worked out on demand, so program
  order does not matter): the layout its reduction leaves (a class made by `reduce`); the
  layout of the class it is broadcast into, without the new axes; for a class whose size-1 dims
  a reduction drops so that a broadcast can stretch them (numpy's `(1, n) + (m, n)`), the
  reduction's result's layout with those dims put back; for a class reduced over some
  axes, the row layout (warps over rows, lanes over 16-byte column vectors: the reduction is lane
  shuffles) or else `WGMMA`, or else, if every reduction takes all its axes longer than 1, the
  strided layout, or else, for rows shorter than 32 vectors, the narrow row layout (a warp's
  lanes over several rows, a few lanes a row), or else, for at most 64 elements, the replicated
  layout; the layout a broadcast into it implies (the operand's, kept in place); else
  `strided(v)` with the widest 16-byte vector that fits; else, for a tile of at most 64
  elements, the replicated layout (every thread holds all of it).  A class whose choice
  depends on one still being chosen waits for it, except a tile broadcast into another class
  (a bias added to every row): that class chooses first, and the tile takes its layout without
  the new axes rather than a strided layout of its own, which would not broadcast in place.
- A class that loads or stores GMEM windows takes the row layout where the strided one would
  not address the window alike in every thread (rows of 160 elements), and holds no more
  elements a vector than the largest power of two dividing those arrays' rows: where rows start
  off a vector boundary every access is one element, and narrower vectors put a warp's accesses
  side by side.
- Every reduction and broadcast is then checked to move no data.

Example:

    %t = asyncdsl.load_smem %buf : memref<64x256xf32, #asyncdsl.smem> -> vector<64x256xf32>
    %m = asyncdsl.reduce max %t {axes = array<i64: 1>} : vector<64x256xf32> -> vector<64xf32>

becomes

    %t = asyncdsl.load_smem %buf {asyncdsl.layout = #asyncdsl.layout<"tiled [[4, 128], ...]">} ...
    %m = asyncdsl.reduce max %t {asyncdsl.layout = #asyncdsl.layout<"tiled [[4], ...]">, ...} ...
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, VectorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.layout_attrs import INFERRED, LayoutAttr
from asyncdsl.dialects.memory_attrs import RegistersType
from asyncdsl.errors import LayoutError
from asyncdsl.hw.fragments import WGMMA, Layout, SplatLayout, register_window
from asyncdsl.hw.layout_choice import (
    REPLICATED_ELEMENTS,
    VECTOR_BYTES,
    narrow_row_layout,
    row_layout,
    row_sharing_warps,
    small_tile_layout,
    strided_layout,
    thread_linear,
)
from asyncdsl.hw.tiling import THREADS, WARP_LANES
from asyncdsl.ir_locations import from_ir_location

SPLAT = SplatLayout()


def is_tile(value: SSAValue) -> bool:
    """A register tile, or a mutable one (`asyncdsl.registers`): both get a layout."""
    return isinstance(value.type, (VectorType, RegistersType))


def _tile_type(value: SSAValue) -> VectorType:
    type_ = value.type.tile if isinstance(value.type, RegistersType) else value.type
    assert isinstance(type_, VectorType), f"{value} is not a register tile"
    return type_


def _shape(value: SSAValue) -> tuple[int, ...]:
    return tuple(_tile_type(value).get_shape())


def is_elementwise(op: Operation) -> bool:
    """`arith` and `math` ops on tiles, compare, select and convert: every operand and the
    result share a layout."""
    elementwise = (op.dialect_name() in ("arith", "math")
                   or isinstance(op, (ir.CompareOp, ir.SelectOp, ir.ConvertOp)))
    return elementwise and any(is_tile(r) for r in op.results)


def element_bytes(value: SSAValue) -> float:
    return ir.element_bits(_tile_type(value)) / 8


def _gmem_vector_cap(members: list[SSAValue]) -> int:
    """The most elements a vector of the class may hold for its GMEM windows to move in vectors:
    the largest power of two dividing the rows of every GMEM array the class loads or stores (rows
    of 12345 elements start at odd elements, so every access is one element; a layout with one
    element a lane then has a warp's accesses 32 adjacent elements instead of 32 elements a vector
    apart).  VECTOR_BYTES (no cap) without such windows."""
    rows = [tuple(op.gmem.type.get_shape())[-1] for op in _gmem_windows(members)
            if len(op.gmem.type.get_shape()) > 1]
    cap = math.gcd(*rows) if rows else 0
    return int(VECTOR_BYTES) if cap == 0 else min(int(VECTOR_BYTES), cap & -cap)


def _gmem_windows(members: list[SSAValue]):
    for member in members:
        if isinstance(member.owner, ir.LoadGmemOp):
            yield member.owner
        for use in member.uses:
            if isinstance(use.operation, ir.StoreGmemOp) and use.operation.value is member:
                yield use.operation


class _Classes:
    """Union-find over tiles that must share a layout, with what each class was given."""

    def __init__(self) -> None:
        self.parent: dict[SSAValue, SSAValue] = {}
        self.layout: dict[SSAValue, Layout] = {}  # decided layouts, by class root
        self.given: dict[SSAValue, tuple[Layout, Operation]] = {}  # by class root
        self.members: dict[SSAValue, list[SSAValue]] = {}

    def root(self, value: SSAValue) -> SSAValue:
        self.parent.setdefault(value, value)
        self.members.setdefault(value, [value])
        while self.parent[value] is not value:
            self.parent[value] = self.parent[self.parent[value]]
            value = self.parent[value]
        return value

    def give(self, value: SSAValue, layout: Layout, op: Operation) -> None:
        self._merge_given(self.root(value), (layout, op))

    def union(self, a: SSAValue, b: SSAValue) -> None:
        a, b = self.root(a), self.root(b)
        if a is b:
            return
        self.parent[b] = a
        self.members[a] += self.members.pop(b)
        if b in self.given:
            self._merge_given(a, self.given.pop(b))

    def _merge_given(self, root: SSAValue, given: tuple[Layout, Operation]) -> None:
        if root in self.given and self.given[root][0] != given[0]:
            (first, first_op), (second, second_op) = self.given[root], given
            raise LayoutError(
                f"tiles in layouts {first} (given at {from_ir_location(first_op)}) and {second} meet in "
                "elementwise math; convert one with tile.to_layout(...)",
                from_ir_location(second_op),
            )
        self.given[root] = given


@dataclass(frozen=True)
class InferLayouts(ModulePass):
    name = "infer-layouts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in attrs.kernels(op):
            _infer(fn)


def _infer(fn: func.FuncOp) -> None:
    ops = [op for op in fn.walk() if any(is_tile(v) for v in (*op.results, *op.operands))]
    classes = _Classes()
    splats: set[SSAValue] = set()
    for op in ops:
        given = _given_layout(op)
        if given is not None:
            classes.give(op.results[0], given, op)
        elif isinstance(op, (ir.FullOp, ir.SplatOp)) or (
            isinstance(op, (ir.BroadcastInDimOp, ir.ReduceOp)) and op.operand in splats
        ):
            splats.add(op.results[0])
        if is_elementwise(op):
            if all(v in splats for v in op.operands if is_tile(v)):  # splats only: a splat result
                splats.update(r for r in op.results if is_tile(r))
            tiles = [v for v in (*op.operands, *op.results) if is_tile(v) and v not in splats]
            for other in tiles[1:]:
                classes.union(tiles[0], other)
        # A GMEM window's tile and its mask share a layout (each thread masks its own elements).
        if isinstance(op, (ir.LoadGmemOp, ir.StoreGmemOp)) and op.mask is not None and op.mask not in splats:
            tile = op.result if isinstance(op, ir.LoadGmemOp) else op.value
            if tile not in splats:
                classes.union(tile, op.mask)
        # A gather's or scatter's tile, its index tiles and its mask share a layout (each thread
        # moves the elements whose indices it holds).
        if isinstance(op, (ir.GatherGmemOp, ir.ScatterGmemOp)):
            tile = op.result if isinstance(op, ir.GatherGmemOp) else op.value
            shared = [v for v in (tile, *op.indices, *([op.mask] if op.mask is not None else []))
                      if v not in splats]
            for other in shared[1:]:
                classes.union(shared[0], other)
        # wgmma's accumulator and register A are in the layout the tensor cores impose.
        if isinstance(op, ir.WgmmaOp):
            classes.give(op.acc, WGMMA, op)
            if op.a_in_registers and op.a not in splats:
                classes.give(op.a, WGMMA, op)
        # A register ref, every tile read from it and every tile written to it share a layout.
        if isinstance(op, ir.ReadRegistersOp):
            classes.union(op.ref, op.result)
        elif isinstance(op, ir.WriteRegistersOp) and op.value not in splats:
            classes.union(op.ref, op.value)
    reduced = {op.operand for op in ops if isinstance(op, ir.ReduceOp) and not _squeezes(op)}
    solver = _Solver(classes, splats, reduced)
    for op in ops:
        for result in op.results:
            if is_tile(result):
                layout = solver.layout_of(result)
                _check_holds(layout, result, op)
                op.attributes[INFERRED] = LayoutAttr(layout)
        if isinstance(op, ir.ReadRegistersOp) and (offsets := op.window_offsets) is not None:
            _check_window(op, offsets, solver)
        if isinstance(op, ir.ReduceOp) and op.result not in splats:
            _check_reduction(op, solver)
        if isinstance(op, ir.BroadcastInDimOp) and op.result not in splats:
            _check_broadcast(op, solver)


class _Unresolved(Exception):
    """A class's layout depends on itself through a reduction or a broadcast: try another rule."""


class _Solver:
    """Every tile's layout, worked out on demand: a reduction's class from its operand's, a class
    fed by a broadcast from the broadcast operand's, else by the defaults (module docstring)."""

    def __init__(self, classes: _Classes, splats: set[SSAValue], reduced: set[SSAValue]):
        self.classes = classes
        self.splats = splats
        self.reduced = reduced
        self._working: set[SSAValue] = set()
        self._waiting = False

    def layout_of(self, value: SSAValue, first: bool = False) -> Layout:
        """The layout of `value`'s class, chosen now if need be; `first`: chosen without waiting
        for the classes being chosen (which then derive theirs from it)."""
        if value in self.splats:
            return SPLAT
        root = self.classes.root(value)
        if root not in self.classes.layout:
            if root in self._working:
                raise _Unresolved
            nested, outer_waiting = bool(self._working) and not first, self._waiting
            self._working.add(root)
            try:
                self.classes.layout[root] = self._choose(root, nested)
            finally:
                self._working.discard(root)
                self._waiting = outer_waiting  # the choice that asked for this one goes on
        return self.classes.layout[root]

    def _choose(self, root: SSAValue, nested: bool) -> Layout:
        classes = self.classes
        if root in classes.given:
            return classes.given[root][0]
        members = classes.members[root]
        shape, size = _shape(members[0]), min(element_bytes(m) for m in members)
        size = max(size, VECTOR_BYTES / _gmem_vector_cap(members))
        self._waiting = False
        for rule in (self._from_reductions, self._from_broadcast_results, self._from_squeezes,
                     self._for_reductions, self._from_broadcast_operands):
            layout = rule(members, shape, size)
            if layout is not None:
                return layout
        if self._waiting and nested:
            raise _Unresolved  # let the class being chosen outside pick first, then derive this one
        if not shape:  # a 0-d tile (one element: a GMEM window of squeezed dims, say): every thread holds it
            return SplatLayout()
        # A tile broadcast into another class (a bias added to every row) takes that class's
        # layout, chosen first: a layout of its own (or none: a bias of 64) would not broadcast
        # into it without moving data.
        layout = self._broadcast_results(members, first=True)
        if layout is not None:
            return layout
        layout = strided_layout(shape, size)
        # The row layout where it holds the shape, for a class fed by a broadcast whose operand
        # waits on it (a bias added to every row: the operand then takes the row's lanes, which a
        # strided layout, reducing over all axes only, cannot give it), and for GMEM windows the
        # strided layout does not address alike in every thread (rows of 160 elements).
        fed = any(isinstance(member.owner, ir.BroadcastInDimOp) for member in members)
        misfit = layout is not None and any(_gmem_windows(members)) and not thread_linear(layout, shape)
        if fed or misfit:
            layout = row_layout(shape, size) or narrow_row_layout(shape, size) or layout
        layout = layout or small_tile_layout(shape)
        if layout is None:
            raise LayoutError(
                f"a {shape} tile has {math.prod(shape)} elements, not a multiple of the warpgroup's 128 "
                "threads; register tiles must give every thread the same number of elements (or hold at "
                f"most {REPLICATED_ELEMENTS}, which every thread then holds whole)",
                _where(members),
            )
        return layout

    def _derived(self, derive) -> Layout | None:
        try:
            return derive()
        except _Unresolved:
            self._waiting = True  # on a class still being chosen
            return None

    def _from_reductions(self, members, shape, size) -> Layout | None:
        """A reduction's result: the layout its operand's reduction leaves (or its error)."""
        for member in members:
            if isinstance(member.owner, ir.ReduceOp):
                layout = self._derived(lambda op=member.owner: _reduced(self.layout_of(op.operand), op))
                if layout is not None:
                    return layout
        return None

    def _from_broadcast_results(self, members, shape, size) -> Layout | None:
        """A tile broadcast into another class: that class's layout without the new axes."""
        return self._broadcast_results(members, first=False)

    def _broadcast_results(self, members, first: bool) -> Layout | None:
        """The layout of a class `members` are broadcast into, without the new axes (through a
        reduction that drops size-1 dims to stretch them, with those dims put back).  `first`:
        that class chosen now, not waiting for this one (a class that then cannot choose is
        passed over); else a class still being chosen is waited for."""
        for member in members:
            for op, squeeze in _broadcasts_of(member):
                if op.result in self.splats:
                    continue
                result: Layout | None
                if first:
                    try:
                        result = self.layout_of(op.result, first=True)
                    except (LayoutError, _Unresolved):  # or it is being chosen: this class itself, say
                        continue
                else:
                    result = self._derived(lambda op=op: self.layout_of(op.result))
                    if result is None:
                        continue
                try:
                    layout = result.reduce(_shape(op.result), _new_axes(op))
                    if squeeze is not None:
                        layout = layout.broadcast_in_dim(_shape(member), _kept_axes(squeeze))
                    return layout
                except LayoutError:
                    continue
        return None

    def _from_squeezes(self, members, shape, size) -> Layout | None:
        """A class whose size-1 dims a reduction drops (to stretch them in a broadcast): a layout
        that holds its elements where the reduction's result has them, so nothing moves."""
        for member in members:
            for use in member.uses:
                op = use.operation
                if not isinstance(op, ir.ReduceOp) or not _squeezes(op) or op.result in self.splats:
                    continue
                result = self._derived(lambda op=op: self.layout_of(op.result))
                if result is None:
                    continue
                try:
                    return result.broadcast_in_dim(shape, _kept_axes(op))
                except LayoutError:
                    raise LayoutError(_SQUEEZE_HINT.format(shape=shape), from_ir_location(op)) from None
        return None

    def _for_reductions(self, members, shape, size) -> Layout | None:
        """A class that is reduced: the row layout (lane shuffles) or WGMMA; a class whose every
        reduction takes all its axes longer than 1 (a (16, 16) tile's total), which neither
        holds, the strided layout."""
        if not any(member in self.reduced for member in members):
            return None
        candidates: list[Layout | None] = [row_layout(shape, size), WGMMA]
        reductions = [use.operation for member in members for use in member.uses
                      if isinstance(use.operation, ir.ReduceOp) and not _squeezes(use.operation)]
        totals = all(shape[axis] == 1 for op in reductions for axis in _kept_axes(op))
        # A class also fed by a broadcast of a row or column (`(t + row).max()` on a (16, 16)
        # tile) needs a layout that holds the row where the broadcast reads it: the narrow row
        # layout reduces along either axis, the strided one only over all of them.
        fed = any(isinstance(member.owner, ir.BroadcastInDimOp) and _shape(member.owner.operand)
                  and member.owner.operand not in self.splats for member in members)
        if fed:
            candidates.append(narrow_row_layout(shape, size))
        if totals:
            candidates.append(strided_layout(shape, size))
        candidates.append(narrow_row_layout(shape, size))
        candidates.append(small_tile_layout(shape))  # a few elements: each thread reduces them alone
        for candidate in candidates:
            if candidate is not None and candidate.can_hold(shape):
                return candidate
        raise LayoutError(_cannot_reduce(shape, totals), _where(members))

    def _from_broadcast_operands(self, members, shape, size) -> Layout | None:
        """A class fed by a broadcast: the operand's registers kept in place.  An operand every
        thread holds as one register (a total) makes the class a splat only if nothing else in
        it holds elements of its own (a load, a register ref): any layout holds the broadcast."""
        holds_elements = any(isinstance(m.owner, Operation) and not isinstance(m.owner, ir.BroadcastInDimOp)
                             and not is_elementwise(m.owner) for m in members)
        for member in members:
            op = member.owner
            if isinstance(op, ir.BroadcastInDimOp):
                operand = self._derived(lambda op=op: self.layout_of(op.operand))
                if operand is not None and not (holds_elements and isinstance(operand, SplatLayout)):
                    try:
                        return _broadcast_layout(operand, shape, tuple(op.dims.get_values()), size)
                    except LayoutError:
                        continue
        return None


def _cannot_reduce(shape: tuple[int, ...], totals: bool) -> str:
    """Why no layout the compiler picks reduces a `shape` tile (`totals`: every reduction of it
    takes all its axes longer than 1), and what would."""
    needs = []
    if len(shape) >= 2:
        multiple = row_sharing_warps(shape[-2]) * WARP_LANES
        needs.append(f"lane shuffles along its rows need rows of a multiple of {multiple} elements, or "
                     f"rows of 1, 2, 4, ... 32 vectors and a multiple of 128 / that many rows (it has "
                     f"{shape[-2]} rows of {shape[-1]})")
        needs.append("asyncdsl.WGMMA needs a (64·m, 8·n) tile")
    if totals:
        needs.append(
            f"a total over all of it needs a multiple of {THREADS} elements (it has {math.prod(shape)})")
    return (f"no register layout the compiler picks can reduce a {shape} tile: " + "; ".join(needs)
            + ". Pad the tile to such a shape (a load with other= fills the padding with a neutral value) "
            "or give a layout that holds it (layout=...)")


def _where(members: list[SSAValue]):
    owner = members[0].owner
    return from_ir_location(owner) if isinstance(owner, Operation) else None


_SQUEEZE_HINT = (
    "stretching the size-1 dims of a {shape} tile: no register layout holds it with its elements where the "
    "broadcast needs them, so they would move between threads; convert it with to_layout(...) first"
)


def _broadcasts_of(value: SSAValue):
    """The broadcasts `value` feeds, each with the reduction that drops its size-1 dims on the
    way (None where it feeds the broadcast directly)."""
    for use in value.uses:
        op = use.operation
        if isinstance(op, ir.BroadcastInDimOp):
            yield op, None
        elif isinstance(op, ir.ReduceOp) and _squeezes(op):
            for inner in op.result.uses:
                if isinstance(inner.operation, ir.BroadcastInDimOp):
                    yield inner.operation, op


def _squeezes(op: ir.ReduceOp) -> bool:
    """Whether `op` reduces over size-1 dims only: it drops them, combining nothing."""
    shape = _shape(op.operand)
    return all(shape[a] == 1 for a in op.axes.get_values())


def _kept_axes(op: ir.ReduceOp) -> tuple[int, ...]:
    """The operand's axes a reduction keeps, in order: where they sit in its result."""
    reduced = op.axes.get_values()
    return tuple(a for a in range(len(_shape(op.operand))) if a not in reduced)


def _new_axes(op: ir.BroadcastInDimOp) -> tuple[int, ...]:
    dims = tuple(op.dims.get_values())
    return tuple(a for a in range(len(_shape(op.result))) if a not in dims)


def _broadcast_layout(operand: Layout, shape: tuple[int, ...], dims: tuple[int, ...], size: float) -> Layout:
    """A layout of the broadcast result that holds the operand's elements where it has them:
    the row layout first (a row reduction broadcast back, as in a softmax), then the named ones."""
    row = row_layout(shape, size)
    if row is not None:
        try:
            return operand.broadcast_in_dim(shape, dims, like=row)
        except LayoutError:
            pass
    return operand.broadcast_in_dim(shape, dims)


def _given_layout(op: Operation) -> Layout | None:
    attr = op.properties.get("layout")
    return attr.layout if isinstance(attr, LayoutAttr) else None


def _reduced(layout: Layout, op: ir.ReduceOp) -> Layout:
    axes = tuple(op.axes.get_values())
    shape = _shape(op.operand)
    if layout == SPLAT:
        return SPLAT
    try:
        return layout.reduce(shape, axes)
    except LayoutError as error:
        raise LayoutError(f"reducing a {shape} tile over axes {axes}: {error.message}",
                          from_ir_location(op)) from None


def _check_holds(layout: Layout, value: SSAValue, op: Operation) -> None:
    try:
        layout.check_holds(_shape(value))
    except LayoutError as error:
        raise LayoutError(error.message, from_ir_location(op)) from None


def _check_window(op: ir.ReadRegistersOp, offsets: tuple[int, ...], solver: _Solver) -> None:
    """A window (at `offsets`) of a register ref is registers the ref holds: whole tiles of its
    layout."""
    try:
        register_window(solver.layout_of(op.ref), _shape(op.ref), offsets, _shape(op.result))
    except LayoutError as error:
        raise LayoutError(error.message, from_ir_location(op)) from None


def _check_reduction(op: ir.ReduceOp, solver: _Solver) -> None:
    expected = _reduced(solver.layout_of(op.operand), op)
    found = solver.layout_of(op.result)
    if found != expected and _squeezes(op):
        raise LayoutError(_SQUEEZE_HINT.format(shape=_shape(op.operand)), from_ir_location(op))
    if found != expected:
        raise LayoutError(
            f"this reduction leaves its result in layout {expected}, but the result meets tiles in layout "
            f"{found}; convert one with to_layout(...)",
            from_ir_location(op),
        )


def _check_broadcast(op: ir.BroadcastInDimOp, solver: _Solver) -> None:
    shape = _shape(op.result)
    result, operand = solver.layout_of(op.result), solver.layout_of(op.operand)
    # The layout algebra's own answer (a strided tile repeats its registers for new leading
    # dims, a tiled one must be the result's reduction), or an operand every thread holds whole.
    try:
        fits = operand.broadcast_in_dim(shape, tuple(op.dims.get_values()), like=result) == result
    except LayoutError:
        fits = operand.replication == THREADS
    if not fits:
        raise LayoutError(
            f"broadcasting a tile in layout {operand} to {shape} where the result is in layout {result} "
            "would move data between threads; convert with to_layout(...) first",
            from_ir_location(op),
        )
