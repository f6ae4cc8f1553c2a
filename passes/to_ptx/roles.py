"""Lowering of warpgroup roles: a branch on the warpgroup index whose body starts by setting the
role's per-thread register count.

    setp.ge.u32 %p5, %r3, 2;               // warpgroup 2 (of 3): the role's warpgroups
    @!%p5 bra $L4_role_end;
    setmaxnreg.dec.sync.aligned.u32 40;    // below the 168 ptxas gives each of 384 threads
    ...                                    // the role's body
    $L4_role_end:

`setmaxnreg` is `.sync.aligned`: all four warps of the warpgroup execute it together, which holds
because the branch depends on the warpgroup index only.  ptxas honours it only when it knows the
register count at entry: `.reqntid` alone did not tell it (C7508, "'setmaxnreg' ignored; unable
to determine register count at entry", ptxas 13.0, whenever the kernel itself needed fewer
registers than the cap), so a kernel whose roles set registers also gets `.maxnreg` at the cap
(`entry_registers`), the count the budget check assumed.  A role at exactly the cap needs no
instruction.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.ir import Operation

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import ptx
from asyncdsl.hw.limits import WARPGROUP_THREADS
from asyncdsl.hw.roles import register_cap, setmaxnreg_direction
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules


def entry_registers(kernel_ops: Iterable[Operation], threads: int, ctas_per_sm: int = 1) -> int | None:
    """The `.maxnreg` of a kernel of `threads` threads (`kernel_ops`: all its ops): the cap when a
    role sets registers, or where `ctas_per_sm` CTAs are to share a multiprocessor's registers
    (more a thread and they would not fit at once)."""
    if ctas_per_sm > 1 or any(isinstance(op, ir.WarpgroupRoleOp) and op.registers is not None
                              for op in kernel_ops):
        return register_cap(threads, ctas_per_sm)
    return None


def _in_role(ctx: KernelLowering, indices: list[int], num_warpgroups: int):
    """A predicate true in the warpgroups `indices` (sorted), or None when that is all of them."""
    b = ctx.b
    warpgroup = ctx.facts.warpgroup
    if indices == list(range(num_warpgroups)):
        return None
    low, high = indices[0], indices[-1]
    if indices == list(range(low, high + 1)):
        if low == 0:
            return b.emit("setp.le.u32 {}, {}, {};", "pred", warpgroup, high)
        if high == num_warpgroups - 1:
            return b.emit("setp.ge.u32 {}, {}, {};", "pred", warpgroup, low)
    predicate = None
    for index in indices:
        equal = b.emit("setp.eq.u32 {}, {}, {};", "pred", warpgroup, index)
        predicate = equal if predicate is None else b.emit("or.pred {}, {}, {};", "pred", predicate, equal)
    return predicate


def _warpgroup_role(ctx: KernelLowering, op: ir.WarpgroupRoleOp) -> None:
    b = ctx.b
    threads = ctx.facts.threads
    predicate = _in_role(ctx, sorted(op.warpgroup_indices), threads // WARPGROUP_THREADS)
    end = b.new_label("role_end")
    if predicate is not None:
        b.branch(end, predicate, negate=True)
    registers = op.register_count
    if registers is not None:
        direction = setmaxnreg_direction(registers, threads, ctx.facts.ctas_per_sm)
        if direction is not None:
            b.run(f"setmaxnreg.{direction}.sync.aligned.u32 {registers};", instr=ptx.InstrOp)
    ctx.lower_block(op.body.block)
    b.label(end)


RULES: Rules = {ir.WarpgroupRoleOp: _warpgroup_role}
