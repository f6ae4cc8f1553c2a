"""Lowering of register tiles to and from GMEM windows (`load_gmem`, `store_gmem`), and of
gathers and scatters (`gather_gmem`, `scatter_gmem`: each element at the address its index
tiles compute, `_indexed_elements`; a gather of whole rows a register vector at a time,
`_row_runs`).

Element e of the tile sits at `starts + e` in the array (squeezed dims at their index).  In the
layout, each element's coordinates are a per-thread part (linear in the thread's bits) plus a
per-register constant, so one PTX sequence addresses all 128 threads: the window's base address
(`gmem_addresses`), plus the thread's offset, plus an immediate per register.

An element outside the array, or whose mask is false, is never touched: a load leaves `other`
in its register, a store skips it.  Each element gets a predicate (`coordinate < dim`, unsigned,
catches negative coordinates too).  Without a mask, elements move in vectors of up to 16 bytes
where the alignment allows and where one predicate serves the whole vector: when every checked
dim has the same coordinate in all of its elements (a window of whole rows at a traced row: the
vector runs along the row, the check is on the row index), or runs along the vector from a
multiple of its length in a dim whose extent is one too (a window at a traced column the index
facts prove a multiple of 8, say, in rows of a multiple of 8: a vector is all inside or all
outside), or no dim needs a check at all.  Otherwise each element moves alone.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.dialects.layout_attrs import inferred_layout, layout_of
from asyncdsl.errors import LayoutError
from asyncdsl.hw.fragments import Layout, SplatLayout, replicated_layout
from asyncdsl.hw.gmem_runs import contiguous_strides
from asyncdsl.hw.layout_choice import strided_layout, thread_linear
from asyncdsl.hw.tiling import THREADS
from asyncdsl.ir_locations import from_ir_location
from asyncdsl.passes.resolve.index_facts import known_divisor
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.gmem_addresses import array_address, wide_product, window_address, window_offset
from asyncdsl.passes.to_ptx.integer_division import unsigned_quotient, unsigned_remainder
from asyncdsl.passes.to_ptx.smem_addresses import MAX_ACCESS_BYTES
from asyncdsl.passes.to_ptx.tile_access import load_piece, primary_guard, store_piece
from asyncdsl.passes.to_ptx.tile_registers import (
    bind_tile,
    constant_register,
    register_kind,
    thread_coefficients,
    thread_term,
    tile_of,
    uniform,
)

_S32 = 2**31


def _reachable(extent: int) -> int:
    """The bound of a dim's unsigned check `coordinate < bound`: its extent, or 2^31 for a dim of
    more elements, which no signed 32-bit coordinate reaches past (and which as an immediate of a
    32-bit comparison ptxas would cut to 32 bits: a dim of 2^32 + 64 checked `< 64`)."""
    return min(extent, _S32)


class _Window:
    """Where each element of a tile in `layout` sits in the GMEM window of `op`: per GMEM dim, the
    thread coefficients and per-element constants of its coordinate, and of the flat offset."""

    def __init__(self, op, layout: Layout, tile_shape: tuple[int, ...]):
        self.shape = tuple(op.gmem.type.get_shape())
        self.sizes = tuple(op.sizes.get_values())
        self.element_bytes = ir.element_bits(op.gmem.type) // 8
        coordinates = layout.coordinates(tile_shape).reshape(THREADS, -1, len(tile_shape))
        axis = iter(range(len(tile_shape)))
        per_dim = [np.zeros(coordinates.shape[:2], dtype=np.int64) if size == ir.SQUEEZED
                   else coordinates[..., next(axis)]
                   for size in self.sizes]
        self.dims = [self._affine(c, f"the coordinate along dim {d}") for d, c in enumerate(per_dim)]
        offset = sum((c * stride for c, stride in zip(per_dim, contiguous_strides(self.shape))),
                     np.zeros_like(per_dim[0]))
        self.offset = self._affine(offset, "the element offset")
        self.vector = layout.vector_length

    @staticmethod
    def _affine(per_element: np.ndarray, what: str) -> tuple[list[int], np.ndarray]:
        thread = per_element[:, 0] - per_element[0, 0]
        return thread_coefficients(thread, what), uniform(per_element - thread[:, None], what)

    def in_bounds(self, ctx: KernelLowering, op) -> list[tuple[int, SSAValue | None, int]]:
        """The dims whose coordinate needs a run-time check: (dim, coordinate base register or
        None for a constant base, constant base)."""
        checks: list[tuple[int, SSAValue | None, int]] = []
        for dim, (start, size, extent) in enumerate(zip(op.starts, self.sizes, self.shape)):
            known = ctx.constant(start)
            width = 1 if size == ir.SQUEEZED else size
            if known is not None and 0 <= known and known + width <= extent:
                continue  # the whole window lies inside this dim
            coefficients, _ = self.dims[dim]
            term = thread_term(ctx, coefficients)
            if known is not None and isinstance(term, int):
                checks.append((dim, None, known + term))
                continue
            base = ctx.reg(start) if known is None else ctx.b.mov("b32", known)
            if not isinstance(term, int):
                base = ctx.b.emit("add.s32 {}, {}, {};", "b32", base, term)
            checks.append((dim, base, 0))
        return checks


def _window(op, layout: Layout, shape: tuple[int, ...]) -> _Window:
    """`_Window`, or a LayoutError at the op's line when the layout does not address the window
    alike in every thread (a layout the user gave: infer-layouts picks ones that do)."""
    try:
        return _Window(op, layout, shape)
    except LayoutError:
        raise LayoutError(
            f"a {shape} tile in layout {layout} cannot move to or from this GMEM window: its threads' "
            "elements do not fall on the window's rows alike, so no one address sequence serves all "
            "128 threads. Leave the layout to infer-layouts, or give one that does (a strided layout "
            "over rows of a multiple of 128 vectors, or of a power of two that divides it)",
            from_ir_location(op),
        ) from None


def _predicates(ctx: KernelLowering, window: _Window, checks, mask_regs: list[SSAValue] | None, elements):
    """One predicate per element of `elements` (register order indices; None: always moves)."""
    b = ctx.b
    out: list[SSAValue | None] = []
    for element in elements:
        predicate = mask_regs[element] if mask_regs is not None else None
        for dim, base, constant in checks:
            extent = window.shape[dim]
            value = constant + int(window.dims[dim][1][element])
            if base is None:
                if not 0 <= value < extent:
                    predicate = b.emit("setp.ne.u32 {}, 0, 0;", "pred")  # never: out of bounds
                continue
            coordinate = b.emit("add.s32 {}, {}, {};", "b32", base, value) if value else base
            inside = b.emit("setp.lt.u32 {}, {}, {};", "pred", coordinate, _reachable(extent))
            predicate = (inside if predicate is None
                         else b.emit("and.pred {}, {}, {};", "pred", predicate, inside))
        out.append(predicate)
    return out


def _thread_address(ctx: KernelLowering, op, window: _Window) -> SSAValue:
    """The window's address plus this thread's offset into it.  The offset (in elements) is a
    32-bit sum widened once, unless its largest value may not fit 32 bits (threads over rows of
    2^24 elements or more: thread 127 of a 64-row tile of rows of 2^28 lies 15 * 2^28 elements
    in), when each of its terms is widened as it is multiplied."""
    base = window_address(ctx, op.gmem, window_offset(ctx, op.gmem, list(op.starts)))
    coefficients = window.offset[0]
    if sum(abs(c) for c in coefficients) >= _S32:
        term = thread_term(ctx, coefficients, wide_factor=window.element_bytes)
        return base if isinstance(term, int) else ctx.b.emit("add.s64 {}, {}, {};", "b64", base, term)
    term = thread_term(ctx, coefficients)
    if isinstance(term, int):
        return base
    return ctx.b.emit("add.s64 {}, {}, {};", "b64", base,
                      wide_product(ctx, term, window.element_bytes, signed=True))


def _element_address(ctx: KernelLowering, address: SSAValue, offset: int) -> tuple[SSAValue, int]:
    """(register, immediate) addressing `address + offset`, the immediate within 32 bits."""
    if -_S32 <= offset < _S32:
        return address, offset
    return ctx.b.emit("add.s64 {}, {}, {};", "b64", address, offset), 0


def _vector_piece(ctx: KernelLowering, op, window: _Window, checks) -> int:
    """The widest access (bytes) every register vector splits into: one element if the vector's
    elements are not adjacent in GMEM or if a checked dim varies along it."""
    constants = window.offset[1].reshape(-1, window.vector)
    if window.vector > 1 and not (np.diff(constants, axis=-1) == 1).all():
        return window.element_bytes
    for dim, _, _ in checks:
        if window.vector > 1 and not _whole_vectors_in_or_out(ctx, op, window, dim):
            return window.element_bytes
    alignment = MAX_ACCESS_BYTES  # the runtime checks every array is 16-byte aligned
    static = 0
    for start, stride in zip(op.starts, contiguous_strides(window.shape)):
        known = ctx.constant(start)
        if known is None:  # a traced start moves the window by a multiple of its divisor's strides
            alignment = math.gcd(alignment, (known_divisor(start) or 1) * stride * window.element_bytes)
        else:
            static += known * stride
    for value in (static * window.element_bytes, *(c * window.element_bytes for c in constants[:, 0]),
                  *(c * window.element_bytes for c in window.offset[0])):
        if value:
            alignment = math.gcd(alignment, int(value))
    size = window.vector * window.element_bytes
    return max(min(alignment, size & -size), window.element_bytes)


def _whole_vectors_in_or_out(ctx: KernelLowering, op, window: _Window, dim: int) -> bool:
    """Whether the check of `dim` holds for all of each register vector or for none of it, so
    that one predicate (its first element's) serves the vector: the dim's coordinate is the same
    along every vector, or it runs through v consecutive values from a multiple of v (v the
    vector length) in a dim whose extent is a multiple of v (the window's start a known multiple
    of v: a constant, or a traced value the index facts prove one)."""
    coefficients, constants = window.dims[dim]
    along = constants.reshape(-1, window.vector)
    if not (np.diff(along, axis=-1) != 0).any():
        return True
    vector = window.vector
    if window.shape[dim] % vector or not (np.diff(along, axis=-1) == 1).all() or (along[:, 0] % vector).any():
        return False
    if any(c % vector for c in coefficients):
        return False
    start = op.starts[dim]
    known = ctx.constant(start)
    return known % vector == 0 if known is not None else known_divisor(start) % vector == 0


def _tile_layout(op, value: SSAValue) -> Layout | None:
    """The layout a stored tile is written in; None for a splat that no strided layout holds, or
    whose window's rows it does not fit (`_store_splat_elementwise`)."""
    layout = layout_of(value)
    if not isinstance(layout, SplatLayout):
        return layout
    if op.mask is not None and not isinstance(layout_of(op.mask), SplatLayout):
        return layout_of(op.mask)
    shape = tuple(ir.shaped_type(value.type).get_shape())
    layout = strided_layout(shape, ir.element_bits(value.type) / 8) if shape else None
    return layout if layout is not None and thread_linear(layout, shape) else None


def _load(ctx: KernelLowering, op: ir.LoadGmemOp) -> None:
    layout = inferred_layout(op.result)
    shape = tuple(op.result.type.get_shape())
    registers_shape = layout.registers_shape(shape)
    if isinstance(layout, SplatLayout):
        # One element (a window of squeezed dims, a 0-d tile addressed as a (1,) tile, or of
        # size-1 dims only, which a broadcast stretches): every thread loads it into its register.
        shape = shape or (1,)
        layout = replicated_layout(shape)
    element = op.result.type.element_type
    window = _window(op, layout, shape)
    kind, size = register_kind(element), window.element_bytes
    checks = window.in_bounds(ctx, op)
    address = _thread_address(ctx, op, window)
    count = len(window.offset[1])
    registers: list[SSAValue] = []
    piece = _vector_piece(ctx, op, window, checks) if op.mask is None else size
    if piece > size or (not checks and op.mask is None):
        per_piece = piece // size
        firsts = range(0, count, per_piece)
        other = constant_register(ctx, op.other, element) if checks else None
        for first, predicate in zip(firsts, _predicates(ctx, window, checks, None, firsts)):
            where, immediate = _element_address(ctx, address, int(window.offset[1][first]) * size)
            registers += load_piece(ctx, where, immediate, piece, size, kind, space="global",
                                    guard=predicate, other=other)
    else:
        mask = _mask_registers(ctx, op, layout, count)
        other = constant_register(ctx, op.other, element)
        width = _element_width(kind, size)
        for element_index, predicate in enumerate(_predicates(ctx, window, checks, mask, range(count))):
            register = ctx.b.mov(kind, other)
            where, immediate = _element_address(ctx, address, int(window.offset[1][element_index]) * size)
            ctx.b.run(f"ld.global.{width} {{}}, [{{}}+{immediate}];", register, where, guard=predicate,
                      instr=ptx.MemoryOp)
            registers.append(register)
    bind_tile(ctx, op.result, np.array(registers, dtype=object).reshape(registers_shape))


def _mask_registers(ctx: KernelLowering, op, layout: Layout, count: int) -> list[SSAValue] | None:
    """The mask's register for each of the `count` elements a thread accesses (a splat mask, a
    0-d one among them, has one register for all)."""
    if op.mask is None:
        return None
    mask = tile_of(ctx, op.mask)
    return [mask.flat()[0]] * count if mask.is_splat else mask.expanded(layout).reshape(-1).tolist()


def _element_width(kind: str, size: int) -> str:
    """The PTX type of a one-element `ld.global` into a register of `kind`."""
    return {"f32": "f32", "b32": "b32", "b64": "b64"}.get(kind, "u8" if size == 1 else "b16")


def _store(ctx: KernelLowering, op: ir.StoreGmemOp) -> None:
    tile = tile_of(ctx, op.value)
    layout = _tile_layout(op, op.value)
    if layout is None:
        _store_splat_elementwise(ctx, op, tile.flat()[0])
        return
    shape = tuple(ir.shaped_type(op.value.type).get_shape())
    element = ir.shaped_type(op.value.type).element_type
    window = _window(op, layout, shape)
    kind, size = register_kind(element), window.element_bytes
    values = tile.expanded(layout).reshape(-1).tolist()
    checks = window.in_bounds(ctx, op)
    address = _thread_address(ctx, op, window)
    piece = _vector_piece(ctx, op, window, checks) if op.mask is None and layout.replication == 1 else size
    if piece > size or (not checks and op.mask is None and layout.replication == 1):
        per_piece = piece // size
        firsts = range(0, len(values), per_piece)
        for first, predicate in zip(firsts, _predicates(ctx, window, checks, None, firsts)):
            where, immediate = _element_address(ctx, address, int(window.offset[1][first]) * size)
            store_piece(ctx, where, immediate, values[first:first + per_piece], size, kind, predicate,
                        space="global")
        return
    mask = _mask_registers(ctx, op, layout, len(values))
    primary = primary_guard(ctx, layout)  # replicated layouts: each element from one thread
    for index, predicate in enumerate(_predicates(ctx, window, checks, mask, range(len(values)))):
        if primary is not None:
            predicate = (primary if predicate is None
                         else ctx.b.emit("and.pred {}, {}, {};", "pred", predicate, primary))
        where, immediate = _element_address(ctx, address, int(window.offset[1][index]) * size)
        store_piece(ctx, where, immediate, [values[index]], size, kind, predicate, space="global")


def _store_splat_elementwise(ctx: KernelLowering, op: ir.StoreGmemOp, value: SSAValue) -> None:
    """A splat stored to a window whose size no strided layout holds (not whole 128-element
    rounds: one element, a per-row total, a 3 x 50 corner): thread t writes the window's
    elements t, t + 128, ... in row-major order, each where it lies inside the array (and the
    splat mask, if any, holds), in a loop, so the PTX does not grow with the window.  An
    element's coordinates come from its number by division by the window's (constant) dims."""
    b = ctx.b
    sizes = tuple(op.sizes.get_values())
    extents, strides = ir.shape_of(op.gmem), contiguous_strides(ir.shape_of(op.gmem))
    element_bytes = ir.element_bits(op.gmem.type) // 8
    dims = [d for d, size in enumerate(sizes) if size != ir.SQUEEZED]
    count = math.prod(sizes[d] for d in dims)
    base = window_address(ctx, op.gmem, window_offset(ctx, op.gmem, list(op.starts)))
    # Elements are stored where the (splat) mask and the checks of squeezed dims hold, and,
    # per element, the checks of the dims the window may leave (dim -> its start register).
    inside = tile_of(ctx, op.mask).flat()[0] if op.mask is not None else None
    checked = {}
    for dim, (start, size, extent) in enumerate(zip(op.starts, sizes, extents)):
        known = ctx.constant(start)
        if known is not None and 0 <= known and known + (1 if size == ir.SQUEEZED else size) <= extent:
            continue
        register = ctx.reg(start) if known is None else b.mov("b32", known)
        if size == ir.SQUEEZED:
            below = b.emit("setp.lt.u32 {}, {}, {};", "pred", register, _reachable(extent))
            inside = _and(ctx, inside, below)
        else:
            checked[dim] = register
    kind = register_kind(ir.shaped_type(op.value.type).element_type)
    number = b.mov("b32", ctx.facts.thread)  # this thread's element: t, t + 128, ...
    head, done = b.new_label("splat"), b.new_label("splat_end")
    b.label(head)
    b.branch(done, b.emit("setp.ge.u32 {}, {}, {};", "pred", number, count))
    guard, address, inner = inside, base, count
    for position, dim in enumerate(dims):
        inner //= sizes[dim]
        coordinate = unsigned_quotient(b, number, inner)
        if position:
            coordinate = unsigned_remainder(b, coordinate, sizes[dim])
        if dim in checked:
            at = b.emit("add.s32 {}, {}, {};", "b32", checked[dim], coordinate)
            guard = _and(ctx, guard, b.emit("setp.lt.u32 {}, {}, {};", "pred", at, _reachable(extents[dim])))
        step = wide_product(ctx, coordinate, strides[dim] * element_bytes, signed=False)
        address = b.emit("add.s64 {}, {}, {};", "b64", address, step)
    store_piece(ctx, address, 0, [value], element_bytes, kind, guard, space="global")
    b.run("add.s32 {}, {}, {};", number, number, THREADS)
    b.branch(head)
    b.label(done)


def _indexed_elements(ctx: KernelLowering, op, layout: Layout, count: int, elements=None,
                      checked_last: bool = True):
    """For each of the `count` elements a thread holds in `layout` (or those of them numbered in
    `elements`), the guard under which a gather or scatter moves it (every index inside its dim,
    compared unsigned so negative ones fail too, and the mask) and its address: the array's base
    plus its indices times the array's byte strides, widened to 64 bits (`mul.wide.s32`).
    `checked_last=False`: the last index is known inside its dim."""
    b = ctx.b
    elements = range(count) if elements is None else elements
    extents = ir.shape_of(op.gmem)
    size = ir.element_bits(op.gmem.type) // 8
    strides = [stride * size for stride in contiguous_strides(extents)]
    masks = _mask_registers(ctx, op, layout, count)
    guards = [masks[e] for e in elements] if masks is not None else [None] * len(elements)
    addresses = [array_address(ctx, op.gmem)] * len(elements)
    last = len(op.indices) - 1
    for dim, (index, extent, stride) in enumerate(zip(op.indices, extents, strides)):
        registers = tile_of(ctx, index).expanded(layout).reshape(-1).tolist()
        terms: dict[SSAValue, tuple[SSAValue | None, SSAValue]] = {}  # a register shared: once
        for slot, element in enumerate(elements):
            register = registers[element]
            if register not in terms:
                checked = checked_last or dim != last
                inside = (b.emit("setp.lt.u32 {}, {}, {};", "pred", register, _reachable(extent)) if checked
                          else None)
                terms[register] = (inside, wide_product(ctx, register, stride, signed=True))
            inside, offset = terms[register]
            if inside is not None:
                guards[slot] = _and(ctx, guards[slot], inside)
            addresses[slot] = b.emit("add.s64 {}, {}, {};", "b64", addresses[slot], offset)
    return guards, addresses


def _gather(ctx: KernelLowering, op: ir.GatherGmemOp) -> None:
    """Each element one guarded `ld.global` at its own address; `other` where the guard fails.
    Where the gather reads whole runs of rows (`_row_runs`), each run is one wider access."""
    b = ctx.b
    layout = inferred_layout(op.result)
    registers_shape = layout.registers_shape(tuple(op.result.type.get_shape()))
    kind, size = register_kind(op.result.type.element_type), ir.element_bits(op.gmem.type) // 8
    run = _row_runs(ctx, op, layout)
    if run > 1:
        count = math.prod(registers_shape)
        firsts = range(0, count, run)
        guards, addresses = _indexed_elements(ctx, op, layout, count, firsts, checked_last=False)
        other = constant_register(ctx, op.other, op.result.type.element_type)
        loaded = []
        for guard, address in zip(guards, addresses):
            loaded += load_piece(ctx, address, 0, run * size, size, kind, space="global", guard=guard,
                                 other=other)
        bind_tile(ctx, op.result, np.array(loaded, dtype=object).reshape(registers_shape))
        return
    guards, addresses = _indexed_elements(ctx, op, layout, math.prod(registers_shape))
    other = constant_register(ctx, op.other, op.result.type.element_type)
    width = _element_width(kind, size)
    loaded = []
    for guard, address in zip(guards, addresses):
        register = b.mov(kind, other)
        b.run(f"ld.global.{width} {{}}, [{{}}];", register, address, guard=guard, instr=ptx.MemoryOp)
        loaded.append(register)
    bind_tile(ctx, op.result, np.array(loaded, dtype=object).reshape(registers_shape))


def _row_runs(ctx: KernelLowering, op: ir.GatherGmemOp, layout: Layout) -> int:
    """Elements one access of the gather may move (1: each alone).  A run of a register vector
    is one access when the gather picks whole rows: its last index is the tile's own column
    (an iota along the last dim, no wider than the array's rows) and every other index, and the
    mask, is the same register along the vector (a row number broadcast along the columns); the
    run starts at a column that is a multiple of its length, in rows of a multiple of it, so it
    is aligned as the array's start (which the runtime checks is 16-byte aligned)."""
    shape = tuple(op.result.type.get_shape())
    extents = ir.shape_of(op.gmem)
    vector, size = layout.vector_length, ir.element_bits(op.gmem.type) // 8
    if isinstance(layout, SplatLayout) or vector < 2 or size > 4 or not shape or shape[-1] > extents[-1]:
        return 1
    if not _iota_along(op.indices[-1], len(shape) - 1):
        return 1
    coordinates = layout.coordinates(shape).reshape(THREADS, -1, vector, len(shape))
    columns = coordinates[..., -1]
    if (np.diff(columns, axis=-1) != 1).any() or (np.diff(coordinates[..., :-1], axis=-2) != 0).any():
        return 1
    run = min(vector, MAX_ACCESS_BYTES // size)
    while run > 1 and ((columns[..., 0] % run).any() or extents[-1] % run):
        run //= 2
    held = [*op.indices[:-1], *([op.mask] if op.mask is not None else [])]
    for value in held:
        tile = tile_of(ctx, value)
        if tile.is_splat:
            continue
        registers = tile.expanded(layout).reshape(-1, run)
        if any(len(set(map(id, row))) > 1 for row in registers):
            return 1
    return run


def _iota_along(value: SSAValue, axis: int) -> bool:
    """Whether `value` holds each element's own index along `axis`: an iota along it, perhaps
    broadcast to more dims."""
    owner = value.owner
    while isinstance(owner, (ir.BroadcastInDimOp, ir.ReduceOp)):
        operand_shape = ir.shaped_type(owner.operand.type).get_shape()
        if isinstance(owner, ir.ReduceOp):  # dropping unit dims only: each element is the operand's
            reduced = list(owner.axes.get_values())
            if any(operand_shape[a] != 1 for a in reduced):
                return False
            inner = [a for a in range(len(operand_shape)) if a not in reduced][axis]
        else:
            dims = list(owner.dims.get_values())
            if axis not in dims:
                return False
            inner = dims.index(axis)
            if operand_shape[inner] != ir.shaped_type(value.type).get_shape()[axis]:
                return False
        value, axis, owner = owner.operand, inner, owner.operand.owner
    return isinstance(owner, ir.IotaOp) and owner.dim.value.data == axis


def _scatter(ctx: KernelLowering, op: ir.ScatterGmemOp) -> None:
    """Each element one guarded `st.global` at its own address, from one thread (replicated
    layouts: the first copy's).  With tile, indices and mask all splats (one array element,
    one value) the warpgroup's leader thread stores it once."""
    shape = tuple(ir.shaped_type(op.value.type).get_shape())
    kind, size = register_kind(ir.shaped_type(op.value.type).element_type), ir.element_bits(op.gmem.type) // 8
    tiles = (op.value, *op.indices, *([op.mask] if op.mask is not None else []))
    layouts = [inferred_layout(v) for v in tiles]
    layout = next((found for found in layouts if not isinstance(found, SplatLayout)), None)
    primary: SSAValue | None  # where the thread holds the element's first copy
    if layout is None:
        guards, addresses = _indexed_elements(ctx, op, layouts[0], 1)
        values, primary = [tile_of(ctx, op.value).flat()[0]], ctx.facts.leader
    else:
        count = math.prod(layout.registers_shape(shape))
        guards, addresses = _indexed_elements(ctx, op, layout, count)
        values = tile_of(ctx, op.value).expanded(layout).reshape(-1).tolist()
        primary = primary_guard(ctx, layout)
    for guard, address, value in zip(guards, addresses, values):
        if primary is not None:
            guard = _and(ctx, guard, primary)
        store_piece(ctx, address, 0, [value], size, kind, guard, space="global")


def _and(ctx: KernelLowering, guard: SSAValue | None, condition: SSAValue) -> SSAValue:
    return condition if guard is None else ctx.b.emit("and.pred {}, {}, {};", "pred", guard, condition)


RULES: Rules = {
    ir.LoadGmemOp: _load,
    ir.StoreGmemOp: _store,
    ir.GatherGmemOp: _gather,
    ir.ScatterGmemOp: _scatter,
}

