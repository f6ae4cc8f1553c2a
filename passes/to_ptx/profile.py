"""Lowering of profiler regions: stamps into the kernel's profile buffer (`asyncdsl.hw.profile`).

Each warpgroup's leader thread writes its own record straight to GMEM, so profiling needs no
shared memory (a pipelined GEMM uses all of it):

    prologue   record = buffer + (linear CTA id * warpgroups + warpgroup) * record bytes
               @leader st.global.u64 [record+0], %globaltimer;  [record+8], %clock64
               @leader st.global.u32 [record+36], CTA id;  [record+40], warpgroup
    region     mov.u32 %clock;  setp.lt.u32 room, events, capacity;  and.pred room, room, leader
               @room st.global.v2.u32 [cursor], {tag, clock};  add events 1;  add cursor 8
    epilogue   @leader st.global.u64 [record+16], %globaltimer;  [record+24], %clock64
               @leader st.global.u32 [record+32], %smid;  [record+44], events

A stamp is a handful of instructions and a fire-and-forget store; an event past the capacity is
counted but not stored, so the buffer is never written past its end.  The count and the cursor
are registers every thread updates in place, as the phase bits of barriers are, so they carry
across loops and branches without copies.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects import ptx
from asyncdsl.hw import profile as layout
from asyncdsl.kernel_binary import ProfileBufferParam
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules


@dataclass
class ProfileRecord:
    """This warpgroup's record in the profile buffer, and where its next event goes."""

    record: SSAValue  # b64: the record's global address
    cursor: SSAValue  # b64: the address of the next event
    events: SSAValue  # b32: events reached so far, dropped ones included
    capacity: int
    region_numbers: dict[str, int]


def profile_param(fn: func.FuncOp) -> ProfileBufferParam | None:
    """The profile buffer parameter of a kernel traced for profiling (None for any other)."""
    capacity = attrs.profile_events(fn)
    if capacity is None:
        return None
    return ProfileBufferParam(ir.region_names(fn), capacity)


def emit_entry(ctx: KernelLowering, fn: func.FuncOp, position: int, param: ProfileBufferParam) -> None:
    """Find this warpgroup's record and stamp the kernel entry into it."""
    b, facts = ctx.b, ctx.facts
    buffer = b.emit(f"ld.param.u64 {{}}, [#{{{{param:{position}}}}}];", "b64")
    x, y, z = (b.emit(f"mov.u32 {{}}, %ctaid.{axis};", "b32") for axis in "xyz")
    width, height = (b.emit(f"mov.u32 {{}}, %nctaid.{axis};", "b32") for axis in "xy")
    cta = b.emit("mad.lo.u32 {}, {}, {}, {};", "b32", z, height, y)
    b.run("mad.lo.u32 {}, {}, {}, {};", cta, cta, width, x)  # x fastest, as the host numbers CTAs
    block = attrs.dims(fn, attrs.BLOCK)
    warpgroups = block[0] * block[1] * block[2] // 128
    index = b.emit("mad.lo.u32 {}, {}, {}, {};", "b32", cta, warpgroups, facts.warpgroup)
    offset = b.emit("mul.wide.u32 {}, {}, {};", "b64", index, layout.record_bytes(param.events_per_warpgroup))
    record = b.emit("add.s64 {}, {}, {};", "b64", buffer, offset)
    _stamp_time(ctx, record, layout.ENTRY_TIMER, layout.ENTRY_CLOCK)
    b.run(f"st.global.u32 [{{}}+{layout.CTA_ID}], {{}};", record, cta, guard=facts.leader, instr=ptx.MemoryOp)
    b.run(f"st.global.u32 [{{}}+{layout.WARPGROUP}], {{}};", record, facts.warpgroup, guard=facts.leader,
          instr=ptx.MemoryOp)
    cursor = b.emit(f"add.s64 {{}}, {{}}, {layout.EVENTS};", "b64", record)
    numbers = {name: number for number, name in enumerate(param.region_names)}
    facts.profile = ProfileRecord(record, cursor, b.mov("b32", 0), param.events_per_warpgroup, numbers)


def emit_exit(ctx: KernelLowering) -> None:
    """Stamp the kernel exit, the SM and the event count into this warpgroup's record."""
    b, facts = ctx.b, ctx.facts
    profile = facts.profile
    assert profile is not None, "only a profiled kernel stamps its exit"
    _stamp_time(ctx, profile.record, layout.EXIT_TIMER, layout.EXIT_CLOCK)
    sm = b.emit("mov.u32 {}, %smid;", "b32")
    b.run(f"st.global.u32 [{{}}+{layout.SM_ID}], {{}};", profile.record, sm, guard=facts.leader,
          instr=ptx.MemoryOp)
    b.run(f"st.global.u32 [{{}}+{layout.EVENT_COUNT}], {{}};", profile.record, profile.events,
          guard=facts.leader, instr=ptx.MemoryOp)


def _stamp_time(ctx: KernelLowering, record: SSAValue, timer_offset: int, clock_offset: int) -> None:
    b, leader = ctx.b, ctx.facts.leader
    timer = b.emit("mov.u64 {}, %globaltimer;", "b64")
    clock = b.emit("mov.u64 {}, %clock64;", "b64")
    b.run(f"st.global.u64 [{{}}+{timer_offset}], {{}};", record, timer, guard=leader, instr=ptx.MemoryOp)
    b.run(f"st.global.u64 [{{}}+{clock_offset}], {{}};", record, clock, guard=leader, instr=ptx.MemoryOp)


def _event(ctx: KernelLowering, region: str, exit: bool) -> None:
    b, facts = ctx.b, ctx.facts
    profile = facts.profile
    if profile is None:
        return  # IR written with markers but not for profiling: regions cost nothing
    tag = b.mov("b32", layout.tag(profile.region_numbers[region], exit))
    clock = b.emit("mov.u32 {}, %clock;", "b32")
    room = b.emit(f"setp.lt.u32 {{}}, {{}}, {profile.capacity};", "pred", profile.events)
    b.run("and.pred {}, {}, {};", room, room, facts.leader)
    b.run("st.global.v2.u32 [{}], {{{}, {}}};", profile.cursor, tag, clock, guard=room, instr=ptx.MemoryOp)
    b.run("add.u32 {}, {}, 1;", profile.events, profile.events)
    b.run(f"add.s64 {{}}, {{}}, {4 * layout.EVENT_WORDS};", profile.cursor, profile.cursor)


def _region_begin(ctx: KernelLowering, op: ir.RegionBeginOp) -> None:
    _event(ctx, op.region.data, exit=False)


def _region_end(ctx: KernelLowering, op: ir.RegionEndOp) -> None:
    _event(ctx, op.region.data, exit=True)


RULES: Rules = {ir.RegionBeginOp: _region_begin, ir.RegionEndOp: _region_end}
