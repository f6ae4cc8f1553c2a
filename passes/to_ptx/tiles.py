"""Lowering of the tile ops: constants, splats, iota, broadcasts, reductions and relayouts.

Broadcasts move no data (infer-layouts chose layouts where each thread already holds what it
needs): each result register is a register the thread has.  Reductions walk
`hw.reduction_tree` step by step, which is what makes their float results equal the
interpreter's.  Relayouts that do not just rename registers go through the warpgroup's shared
scratch (`asyncdsl.tile_scratch`): every thread writes what it holds, then reads what it needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import Float32Type, IntegerType
from xdsl.ir import Operation, SSAValue

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.dialects.layout_attrs import inferred_layout
from asyncdsl.hw.fragments import SplatLayout
from asyncdsl.hw.options import TileReduction
from asyncdsl.hw.reduction_tree import reduction_tree
from asyncdsl.hw.tiling import WARP_LANES, WARPS
from asyncdsl.passes.to_ptx.builder import register_class
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.tile_access import read_tile, write_tile
from asyncdsl.passes.to_ptx.tile_math import ELEMENT_RULES
from asyncdsl.passes.to_ptx.tile_registers import (
    bind_tile,
    constant_register,
    register_kind,
    slot_map,
    thread_coefficients,
    thread_term,
    tile_of,
    uniform,
)


def _shape(value: SSAValue) -> tuple[int, ...]:
    return tuple(ir.shaped_type(value.type).get_shape())


def _splat(ctx: KernelLowering, value: SSAValue, register: SSAValue) -> None:
    registers = inferred_layout(value).registers_shape(_shape(value))
    bind_tile(ctx, value, np.full(registers, register, dtype=object))


def _full(ctx: KernelLowering, op: ir.FullOp) -> None:
    _splat(ctx, op.result, constant_register(ctx, op.value, op.result.type.element_type))


def _splat_op(ctx: KernelLowering, op: ir.SplatOp) -> None:
    _splat(ctx, op.result, ctx.reg(op.scalar))


def _iota(ctx: KernelLowering, op: ir.IotaOp) -> None:
    layout, shape, dim = inferred_layout(op.result), _shape(op.result), op.dim.value.data
    along = layout.coordinates(shape)[..., dim].reshape(128, -1)  # (threads, slots)
    per_thread = along[:, 0] - along[0, 0]
    term = thread_term(ctx, thread_coefficients(per_thread, f"iota along dim {dim}"))
    constants = uniform(along - per_thread[:, None], "iota's register values")
    b = ctx.b
    out = []
    for constant in constants:
        if isinstance(term, int):
            out.append(b.mov("b32", int(constant) + term))
        else:
            out.append(b.emit("add.s32 {}, {}, {};", "b32", term, int(constant)))
    bind_tile(ctx, op.result, np.array(out, dtype=object).reshape(layout.registers_shape(shape)))


def _broadcast(ctx: KernelLowering, op: ir.BroadcastInDimOp) -> None:
    source = tile_of(ctx, op.operand)
    target_layout = inferred_layout(op.result)
    if source.is_splat:
        _splat(ctx, op.result, source.flat()[0])
        return
    dims = tuple(op.dims.get_values())
    source_shape = source.shape

    def project(coordinates: np.ndarray) -> np.ndarray:
        # The operand's element: its dims at the result's `dims`, size-1 dims at 0.
        picked = coordinates[..., list(dims)]
        return np.where(np.array(source_shape) == 1, 0, picked)

    slots = slot_map(source.layout, source_shape, target_layout, _shape(op.result), project)
    registers = np.array(source.flat(), dtype=object)[slots]
    bind_tile(ctx, op.result, registers.reshape(target_layout.registers_shape(_shape(op.result))))


# -- reductions ----------------------------------------------------------------------------------

_COMBINE: dict[tuple[TileReduction, bool], type[Operation]] = {
    (TileReduction.SUM, True): arith.AddfOp,
    (TileReduction.SUM, False): arith.AddiOp,
    (TileReduction.MAX, True): arith.MaximumfOp,
    (TileReduction.MAX, False): arith.MaxSIOp,
    (TileReduction.MIN, True): arith.MinimumfOp,
    (TileReduction.MIN, False): arith.MinSIOp,
}


def _combiner(op: ir.ReduceOp) -> Callable[[KernelLowering, SSAValue, SSAValue], SSAValue]:
    element = ir.shaped_type(op.operand.type).element_type
    is_float = not isinstance(element, IntegerType)
    rule = ELEMENT_RULES[_COMBINE[(TileReduction(op.kind.data), is_float)]]
    return lambda ctx, a, b: rule(ctx, None, element, [a, b])


def _shuffle(ctx: KernelLowering, value: SSAValue, mask: int) -> SSAValue:
    """Lane `lane ^ mask`'s `value` (`shfl.sync.bfly`, 32 bits: 16-bit values widen)."""
    b = ctx.b
    kind = register_class(value)
    if kind == "b16":
        wide = b.emit("cvt.u32.u16 {}, {};", "b32", value)
        other = b.emit(f"shfl.sync.bfly.b32 {{}}, {{}}, {mask}, 0x1f, 0xffffffff;", "b32", wide)
        return b.emit("cvt.u16.u32 {}, {};", "b16", other)
    return b.emit(f"shfl.sync.bfly.b32 {{}}, {{}}, {mask}, 0x1f, 0xffffffff;", kind, value)


def _reduce(ctx: KernelLowering, op: ir.ReduceOp) -> None:
    source = tile_of(ctx, op.operand)
    combine = _combiner(op)
    axes = tuple(op.axes.get_values())
    if source.is_splat:
        # One value stands for every element: fold it with itself once per reduced element.
        value = first = source.flat()[0]
        for _ in range(math.prod(source.shape[a] for a in axes) - 1):
            value = combine(ctx, value, first)
        _splat(ctx, op.result, value)
        return
    tree = reduction_tree(source.layout, source.shape, axes)
    registers = source.regs.reshape(-1, source.layout.vector_length)
    values: list[list[SSAValue]] = []
    for terms in tree.register_terms:  # stage 1: in the thread
        accumulator = list(registers[terms[0]])
        for term in terms[1:]:
            accumulator = [combine(ctx, a, r) for a, r in zip(accumulator, registers[term])]
        if tree.fold_vector:
            folded = accumulator[0]
            for lane in accumulator[1:]:
                folded = combine(ctx, folded, lane)
            accumulator = [folded]
        values.append(accumulator)
    for mask in tree.lane_xors:  # stage 2: butterflies across lanes
        values = [[combine(ctx, v, _shuffle(ctx, v, mask)) for v in vector] for vector in values]
    if tree.warp_groups:  # stage 3: across warps, through the scratch
        values = _across_warps(ctx, op, tree, values)
    result_layout = inferred_layout(op.result)
    flat = np.array([v for vector in values for v in vector], dtype=object)
    bind_tile(ctx, op.result, flat.reshape(result_layout.registers_shape(_shape(op.result))))


def _across_warps(ctx: KernelLowering, op: ir.ReduceOp, tree,
                  values: list[list[SSAValue]]) -> list[list[SSAValue]]:
    b = ctx.b
    combine = _combiner(op)
    kind = register_class(values[0][0])
    size = 2 if kind == "b16" else 4
    store_type = {"b16": "b16", "f32": "f32", "b32": "b32"}[kind]
    per_thread = len(values) * len(values[0])  # registers × vector lanes, [warp][lane][register][lane]
    warp_stride = WARP_LANES * per_thread * size
    scratch = ctx.facts.tile_scratch
    assert scratch is not None, "allocate-smem gives a kernel that reduces across warps a tile scratch"
    mine = b.emit("mad.lo.s32 {}, {}, {}, {};", "b32", ctx.facts.thread, per_thread * size, scratch)
    for index, value in enumerate(v for vector in values for v in vector):
        b.run(f"st.shared.{store_type} [{{}}+{index * size}], {{}};", mine, value, instr=ptx.MemoryOp)
    b.bar("sync", ctx.facts.named_barrier, 128)
    # Warp w's group is the warps that differ from w only in the reduced warp digits, which are
    # bit fields of the warp index: group member j is (w with those bits cleared) | offset j.
    group = tree.warp_groups[0]
    mask = _field_mask(group)
    offsets = [w - group[0] for w in group]
    assert all(g == tuple((g[0] & ~mask) | o for o in offsets) for g in tree.warp_groups)
    warp = b.emit("shr.u32 {}, {}, 5;", "b32", ctx.facts.thread)
    reduced_bits = b.emit("and.b32 {}, {}, {};", "b32", warp, mask)
    first = b.emit("mul.lo.s32 {}, {}, {};", "b32", reduced_bits, warp_stride)
    first = b.emit("sub.s32 {}, {}, {};", "b32", mine, first)  # this lane's entry of the group's first warp
    out: list[SSAValue] = []
    for index in range(per_thread):
        accumulator: SSAValue | None = None
        for offset in offsets:
            read = b.emit(
                f"ld.shared.{store_type} {{}}, [{{}}+{offset * warp_stride + index * size}];", kind, first,
                instr=ptx.MemoryOp)
            accumulator = read if accumulator is None else combine(ctx, accumulator, read)
        assert accumulator is not None, "a warp group has at least one warp"
        out.append(accumulator)
    b.bar("sync", ctx.facts.named_barrier, 128)  # the scratch is free for the next use
    width = len(values[0])
    return [out[i:i + width] for i in range(0, len(out), width)]


def _field_mask(group: tuple[int, ...]) -> int:
    """The warp-index bits in which a group's warps differ."""
    mask = 0
    for w in group:
        mask |= w ^ group[0]
    assert mask < WARPS
    return mask


# -- relayouts -----------------------------------------------------------------------------------


def _relayout(ctx: KernelLowering, op: ir.RelayoutOp) -> None:
    source = tile_of(ctx, op.operand)
    target = inferred_layout(op.result)
    shape = source.shape
    if source.layout == target or source.is_splat:
        bind_tile(ctx, op.result, source.expanded(target))
        return
    if isinstance(target, SplatLayout):
        raise AssertionError("infer-layouts never relayouts a tile to a splat")
    element = ir.shaped_type(op.operand.type).element_type
    scratch = ctx.facts.tile_scratch
    assert scratch is not None, "allocate-smem gives a kernel that relayouts tiles a tile scratch"
    b = ctx.b
    mask = register_kind(element) == "pred"
    regs = source.regs
    if mask:  # no instruction stores a predicate: a mask travels as 16-bit 0s and 1s
        regs = _each(regs, lambda p: b.emit("selp.b16 {}, 1, 0, {};", "b16", p))
    write_tile(ctx, scratch, 16, source.layout, shape, _scratch_element(element), regs)
    b.bar("sync", ctx.facts.named_barrier, 128)
    regs = read_tile(ctx, scratch, 16, target, shape, _scratch_element(element))
    b.bar("sync", ctx.facts.named_barrier, 128)
    if mask:
        regs = _each(regs, lambda h: b.emit("setp.ne.b16 {}, {}, 0;", "pred", h))
    bind_tile(ctx, op.result, regs)


def _each(regs: np.ndarray, convert) -> np.ndarray:
    """`convert` of every register of `regs`, once for a register that several slots share."""
    converted: dict[SSAValue, SSAValue] = {}
    for register in regs.flat:
        if register not in converted:
            converted[register] = convert(register)
    return np.array([converted[r] for r in regs.flat], dtype=object).reshape(regs.shape)


def _scratch_element(element):
    # Narrow types travel in 16 bits, as their registers hold them, and so do masks (0 or 1);
    # the rest as they are.  `scratch_bytes` reserves this much.
    if register_kind(element) in ("b16", "pred"):
        return dtypes.int16.mlir()
    if isinstance(element, Float32Type):
        return element
    return dtypes.int32.mlir()


RULES: Rules = {
    ir.FullOp: _full,
    ir.SplatOp: _splat_op,
    ir.IotaOp: _iota,
    ir.BroadcastInDimOp: _broadcast,
    ir.ReduceOp: _reduce,
    ir.RelayoutOp: _relayout,
}

