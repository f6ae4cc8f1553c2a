"""Lowering of `asyncdsl.load_index`: a read-only 32-bit load of the element's address, every
thread the same address.

    ld.global.nc.u32 %r9, [%rd6];
"""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.gmem_addresses import window_address, window_offset


def _load_index(ctx: KernelLowering, op: ir.LoadIndexOp) -> None:
    address = window_address(ctx, op.array, window_offset(ctx, op.array, op.indices))
    ctx.bind(op.result, ctx.b.emit("ld.global.nc.u32 {}, [{}];", "b32", address, instr=ptx.MemoryOp))


RULES: Rules = {ir.LoadIndexOp: _load_index}
