"""Lowering of warpgroups taking turns onto named barriers (PTX ISA: `bar.sync`, `bar.arrive`).

Barrier `barrier + i` carries the turn to party i (warpgroup `first + i`): party i waits on it
with `bar.sync id, 256` (its own 128 threads) and the party before it arrives on it with
`bar.arrive id, 256` (the other 128) when its turn ends.  An arrival that synchronizes with the
wait also orders the memory accesses before it (the PTX memory model), as the interpreter
assumes.  The allocation has the last party arrive on the first party's barrier once, so that
the first turn needs no one; the last arrival of the last party is never waited for.
"""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.hw.limits import WARPGROUP_THREADS
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules

_PAIR = 2 * WARPGROUP_THREADS  # the waiting warpgroup and the one whose arrival it waits for


def _alloc_turns(ctx: KernelLowering, op: ir.AllocTurnsOp) -> None:
    first, parties, barrier = op.group
    b = ctx.b
    last = b.emit("setp.eq.u32 {}, {}, {};", "pred", ctx.facts.warpgroup, first + parties - 1)
    b.bar("arrive", barrier, _PAIR, guard=last)


def _take_turn(ctx: KernelLowering, op: ir.TakeTurnOp) -> None:
    first, _, barrier = op.group
    mine = ctx.b.emit("add.u32 {}, {}, {};", "b32", ctx.facts.warpgroup, barrier - first)
    ctx.b.bar("sync", mine, _PAIR)


def _pass_turn(ctx: KernelLowering, op: ir.PassTurnOp) -> None:
    first, parties, barrier = op.group
    b = ctx.b
    following = b.emit("sub.u32 {}, {}, {};", "b32", ctx.facts.warpgroup, first - 1)  # next party's position
    wrapped = b.emit("setp.eq.u32 {}, {}, {};", "pred", following, parties)
    position = b.emit("selp.u32 {}, 0, {}, {};", "b32", following, wrapped)
    theirs = b.emit("add.u32 {}, {}, {};", "b32", position, barrier)
    b.bar("arrive", theirs, _PAIR)


RULES: Rules = {
    ir.AllocTurnsOp: _alloc_turns,
    ir.TakeTurnOp: _take_turn,
    ir.PassTurnOp: _pass_turn,
}
