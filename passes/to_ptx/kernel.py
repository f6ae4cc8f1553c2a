"""The parameter list, prologue and epilogue of a lowered kernel.

Parameters: one `.u64` device address per array argument, one `.s32` or `.f32` value per runtime
scalar argument (int or float), then the TMA descriptors, either one 128-byte by-value parameter
each (`__grid_constant__` style) or a single `.u64` pointer to the descriptor scratch in global
memory, then (a kernel that asks its rank or addresses a peer) the `.u64` address of the peer
table.  Kernel argument i is parameter i: the function takes its arrays first, then its scalars.

Prologue: the scalar arguments loaded into registers, thread ids and the leader predicate, the
1024-aligned shared-memory base (aligned at run time: not every load path honours `.extern
.shared .align`, docs/hardware.md §1.1), descriptor addresses and their prefetch, barrier
initialisation by one thread, the fence that publishes it to the async proxy, and a CTA (or
cluster) barrier so nobody uses a barrier before it exists.

A profiled kernel also takes its profile buffer last; each warpgroup stamps its entry into it
first thing in the prologue and its exit last thing in the epilogue (`profile.py`).

Epilogue: the leader waits until its TMA stores have read their shared memory (the CTA's shared
memory must outlive them), every thread waits for its cp.async chunks to land, and a cluster
meets once more so no CTA exits while a peer may still multicast into it.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import IndexType, MemRefType

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects import ptx
from asyncdsl.ir_locations import from_ir_location
from asyncdsl.kernel_binary import (
    DescriptorScratchParam,
    ErrorBufferParam,
    KernelParam,
    PeerTableParam,
    PointerParam,
    ProfileBufferParam,
    RuntimeCheck,
    ScalarParam,
    TensorMapParam,
)
from asyncdsl.passes.to_ptx import distributed, profile
from asyncdsl.passes.to_ptx.context import KernelFacts, KernelLowering


def kernel_params(fn: func.FuncOp) -> tuple[KernelParam, ...]:
    """The kernel's parameters in order (shared by the lowering and the runtime contract)."""
    names = attrs.arg_names(fn)
    params: list[KernelParam] = []
    arrays = 0
    for i, arg in enumerate(fn.args):
        if isinstance(arg.type, MemRefType):
            assert arrays == i, "a kernel takes its arrays first"
            params.append(PointerParam(i))
            arrays += 1
        else:
            kind = "int" if isinstance(arg.type, IndexType) else "float"
            name = names[i] if i < len(names) else f"argument {i}"  # IR written by hand may lack names
            params.append(ScalarParam(i - arrays, kind, name))
    found = attrs.descriptors(fn)
    if attrs.descriptor_mode(fn) == "scratch":
        if found:
            params.append(DescriptorScratchParam(attrs.descriptor_slots(fn)))
    else:
        params.extend(TensorMapParam(i) for i in range(len(found)))
    peer_table = distributed.peer_table_param(fn)
    if peer_table is not None:
        params.append(peer_table)
    if attrs.debug(fn):
        checks = runtime_checks(fn)
        if checks:
            params.append(ErrorBufferParam(tuple(_described(check) for check in checks)))
    profiled = profile.profile_param(fn)
    if profiled is not None:
        params.append(profiled)
    return tuple(params)


def runtime_checks(fn: func.FuncOp) -> list:
    """The kernel's hints and checks, in the order that numbers them (1, 2, ...)."""
    return [op for op in fn.walk() if isinstance(op, (ir.CheckOp, ir.MultipleOfOp, ir.CheckTileOp))]


def _described(op) -> RuntimeCheck:
    location = from_ir_location(op)
    file, line = (location.file, location.line) if location is not None else ("<unknown>", 0)
    return RuntimeCheck(ir.check_message(op), file, line)


_SCALAR_PARAM_KINDS = {"int": "s32", "float": "f32"}


def param_kinds(params: tuple[KernelParam, ...]) -> list[str]:
    def kind(param: KernelParam) -> str:
        if isinstance(param, TensorMapParam):
            return "tensor_map"
        if isinstance(param, ScalarParam):
            return _SCALAR_PARAM_KINDS[param.kind]
        return "u64"

    return [kind(p) for p in params]


def emit_prologue(ctx: KernelLowering, fn: func.FuncOp, params: tuple[KernelParam, ...]) -> None:
    b = ctx.b
    block = attrs.dims(fn, attrs.BLOCK)
    cluster = attrs.dims(fn, attrs.CLUSTER)
    cluster_size = cluster[0] * cluster[1] * cluster[2]

    for position, param in enumerate(params):
        if isinstance(param, ScalarParam):
            # Kernel argument `position` lives in a register from here on: an index in a b32
            # register like every other index, a float in an f32 one.
            kind = _SCALAR_PARAM_KINDS[param.kind]
            register = "b32" if param.kind == "int" else "f32"
            ctx.bind(fn.args[position],
                     b.emit(f"ld.param.{kind} {{}}, [#{{{{param:{position}}}}}];", register))

    tid = b.emit("mov.u32 {}, %tid.x;", "b32")
    if block[0] > 128:
        warpgroup = b.emit("shr.u32 {}, {}, 7;", "b32", tid)
        named_barrier = b.emit("add.u32 {}, {}, 1;", "b32", warpgroup)
        thread = b.emit("and.b32 {}, {}, 127;", "b32", tid)
    else:
        warpgroup = b.mov("b32", 0)
        named_barrier = b.mov("b32", 1)
        thread = tid
    leader = b.emit("setp.eq.u32 {}, {}, 0;", "pred", thread)
    cta_leader = b.emit("setp.eq.u32 {}, {}, 0;", "pred", tid)
    base = b.emit("mov.u32 {}, #{{smem}};", "b32")
    b.run("add.u32 {}, {}, 1023;", base, base)
    b.run("and.b32 {}, {}, -1024;", base, base)

    addresses = _descriptor_addresses(ctx, params)
    ctx.facts = KernelFacts(tid, thread, warpgroup, named_barrier, leader, base, addresses, cluster_size,
                            attrs.arch(fn))
    ctx.facts.threads = block[0] * block[1] * block[2]
    ctx.facts.ctas_per_sm = attrs.ctas_per_sm(fn)
    for position, param in enumerate(params):
        if isinstance(param, ProfileBufferParam):
            profile.emit_entry(ctx, fn, position, param)  # first, so the kernel's time includes the prologue
        if isinstance(param, ErrorBufferParam):
            ctx.facts.error_buffer = b.emit(f"ld.param.u64 {{}}, [#{{{{param:{position}}}}}];", "b64")
            ctx.check_ids = {op: number for number, op in enumerate(runtime_checks(fn), start=1)}
        if isinstance(param, PeerTableParam):
            ctx.facts.peer_table = b.emit(f"ld.param.u64 {{}}, [#{{{{param:{position}}}}}];", "b64")
    for address in addresses:
        b.run("prefetch.tensormap [{}];", address, guard=cta_leader, instr=ptx.MemoryOp)
    scratch = attrs.tile_scratch(fn)
    if scratch is not None:
        offset, size = scratch
        ctx.facts.tile_scratch = b.emit("mad.lo.s32 {}, {}, {}, {};", "b32", warpgroup, size, base)
        b.run("add.s32 {}, {}, {};", ctx.facts.tile_scratch, ctx.facts.tile_scratch, offset)

    groups = ctx.ops_of(ir.AllocBarriersOp)
    for group in groups:
        count = group.result.type.count.data
        arrivals = group.arrival_count.value.data
        assert group.offset is not None, "allocate-smem places every barrier group"
        first = b.emit("add.s32 {}, {}, {};", "b32", base, group.offset.value.data)
        for i in range(count):
            b.run(f"mbarrier.init.shared::cta.b64 [{{}}+{8 * i}], {arrivals};", first, guard=cta_leader,
                      instr=ptx.MbarrierInitOp)
        ctx.phase_bits[group.result] = b.mov("b32", 0)
    if groups:
        b.append(ptx.MbarrierInitFenceOp(cta_leader))
    if cluster_size > 1:
        b.append(ptx.ClusterBarrierOp("arrive"))
        b.append(ptx.ClusterBarrierOp("wait"))
    elif groups:
        b.bar("sync", 0)


def _descriptor_addresses(ctx: KernelLowering, params: tuple[KernelParam, ...]) -> list:
    b = ctx.b
    addresses = []
    for position, param in enumerate(params):
        if isinstance(param, TensorMapParam):
            # The map stays where the driver put it; TMA takes its generic address (fact 2).
            address = b.emit(f"mov.b64 {{}}, #{{{{param:{position}}}}};", "b64")
            b.run("cvta.param.u64 {}, {};", address, address)
            addresses.append(address)
        elif isinstance(param, DescriptorScratchParam):
            scratch = b.emit(f"ld.param.u64 {{}}, [#{{{{param:{position}}}}}];", "b64")
            for offset in param.slot_offsets:
                addresses.append(b.emit("add.s64 {}, {}, {};", "b64", scratch, offset) if offset else scratch)
    return addresses


def emit_epilogue(ctx: KernelLowering) -> None:
    stores = ctx.ops_of(ir.TmaStoreOp, ir.TmaScatter4Op, ir.BulkStoreOp)
    if stores:
        if any(not op.commit.value.data for op in stores):
            # A store issued with arrive=False joins no group until something commits; close
            # the last group so that the wait covers it too.
            ctx.b.append(ptx.BulkCommitOp(ctx.facts.leader))
        ctx.b.append(ptx.BulkWaitOp(0, read=True, guard=ctx.facts.leader))
    if ctx.ops_of(ir.CpAsyncLoadOp):
        # cp.async chunks still in flight would land in the shared memory of an exited CTA.
        ctx.b.append(ptx.CpAsyncWaitAllOp())
    if ctx.facts.cluster_size > 1:
        ctx.b.append(ptx.ClusterBarrierOp("arrive"))
        ctx.b.append(ptx.ClusterBarrierOp("wait"))
    if ctx.facts.profile is not None:
        profile.emit_exit(ctx)  # last, so the kernel's time includes the epilogue's waits
