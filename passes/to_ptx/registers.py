"""Lowering of mutable register tiles: a ref is a fixed set of PTX registers (zeroed once),
a write moves the tile into them, a read copies them out (a later write must not change a tile
already read; ptxas removes the copies it does not need)."""

from __future__ import annotations

import numpy as np

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.layout_attrs import inferred_layout
from asyncdsl.hw.fragments import register_window
from asyncdsl.passes.to_ptx.builder import register_class
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.tile_registers import TileRegisters, bind_tile, register_kind, tile_of


def _alloc(ctx: KernelLowering, op: ir.AllocRegistersOp) -> None:
    layout = inferred_layout(op.result)
    tile = op.result.type.tile
    shape = tuple(tile.get_shape())
    kind = register_kind(tile.element_type)
    zero = "0f00000000" if kind == "f32" else 0
    regs = np.empty(layout.registers_shape(shape), dtype=object)
    for position in np.ndindex(regs.shape):
        regs[position] = (ctx.b.emit("setp.ne.u32 {}, 0, 0;", "pred") if kind == "pred"
                          else ctx.b.mov(kind, zero))
    ctx.tiles[op.result] = TileRegisters(layout, shape, regs)


def _write(ctx: KernelLowering, op: ir.WriteRegistersOp) -> None:
    ref = tile_of(ctx, op.ref)
    for target, source in zip(ref.regs.reshape(-1), tile_of(ctx, op.value).expanded(ref.layout).reshape(-1)):
        if target is not source:
            ctx.b.assign(target, source)


def _read(ctx: KernelLowering, op: ir.ReadRegistersOp) -> None:
    ref = tile_of(ctx, op.ref)
    regs = ref.regs
    if op.window_offsets is not None:
        regs = regs[
            register_window(ref.layout, ref.shape, op.window_offsets, tuple(op.result.type.get_shape()))]
    copies = np.array([ctx.b.mov(register_class(r), r) for r in regs.reshape(-1)], dtype=object)
    bind_tile(ctx, op.result, copies.reshape(regs.shape))


RULES: Rules = {
    ir.AllocRegistersOp: _alloc,
    ir.WriteRegistersOp: _write,
    ir.ReadRegistersOp: _read,
}
