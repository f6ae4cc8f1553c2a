"""Lowering of the multi-device ops: the device id, signals and their waits, peer addresses.

A kernel that asks its rank or signals a peer takes the address of its device's peer table
(`PeerTableParam`, built by `runtime/symmetric.py`): 64-bit words, the rank first, then for
every device pe the byte offset from an array of the symmetric heap here to the address pe's copy
of it is mapped at (NVSHMEM maps every peer's heap into this process, each at its own base).
A peer's cell is the local cell's address plus its offset; a peer TMA copy selects its
descriptor among the consecutive per-device ones (`allocate_descriptor_scratch.py`) by adding
128 bytes per device.

A signal is a system-scope release by the warpgroup's leader, after the warpgroup meets (so
that what every thread did before is ordered before it) and after a proxy fence (so that the
TMA stores it announces, generic-proxy ordered by their `wait_group`, are covered too); a wait
is a system-scope acquire that every thread spins on, then a proxy fence so the TMA loads that
follow see what the signaller wrote.  Example, `signal(flags.peer(pe).at[i], 1, op="add")` then
`wait_signal(flags.at[j], "ge", 2)`:

    ld.global.nc.s64 %rd7, [%rd5+8*pe+8];      // pe's offset in the peer table
    add.s64 %rd8, %rd3, %rd7;
    bar.sync %r5, 128;
    @%p1 fence.proxy.async.global;
    @%p1 red.release.sys.global.add.u32 [%rd8], 1;
    L1_signal:
    ld.acquire.sys.global.u32 %r9, [%rd6];
    setp.ge.u32 %p2, %r9, 2;
    @!%p2 bra $L1_signal;
    fence.proxy.async.global;
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import BlockArgument, SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects import ptx
from asyncdsl.hw.limits import DESCRIPTOR_BYTES
from asyncdsl.kernel_binary import PeerTableParam
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.gmem_addresses import window_address, window_offset

_WORD = 8  # bytes per peer-table entry


def peer_table_param(fn: func.FuncOp) -> PeerTableParam | None:
    """The peer table parameter of a kernel that reads its rank or addresses a peer (else None),
    naming the arguments it addresses on peers (the runtime checks they are symmetric)."""
    needed, on_peers = False, set()
    for op in fn.walk():
        if isinstance(op, ir.DeviceIdOp):
            needed = True
        elif isinstance(op, ir.SignalOp) and op.peer is not None:
            needed = True
            assert isinstance(op.flags, BlockArgument), "a signal's flags are a kernel argument"
            on_peers.add(op.flags.index)
        elif isinstance(op, (ir.TmaLoadOp, ir.TmaStoreOp)) and op.peer is not None:
            needed = True
            on_peers.add(op.descriptor.arg_index.data)
    return PeerTableParam(attrs.devices(fn), tuple(sorted(on_peers))) if needed else None


def _peer_table(ctx: KernelLowering) -> SSAValue:
    table = ctx.facts.peer_table
    assert table is not None, "the kernel's parameters include the peer table (peer_table_param)"
    return table


def _device_id(ctx: KernelLowering, op: ir.DeviceIdOp) -> None:
    ctx.bind(op.result, ctx.b.emit("ld.global.nc.u32 {}, [{}];", "b32", _peer_table(ctx), instr=ptx.MemoryOp))


def peer_offset(ctx: KernelLowering, pe: SSAValue) -> SSAValue:
    """The byte offset (b64) from a symmetric address here to device `pe`'s copy."""
    b, table = ctx.b, _peer_table(ctx)
    known = ctx.constant(pe)
    if known is not None:
        return b.emit(f"ld.global.nc.s64 {{}}, [{{}}+{_WORD * (known + 1)}];", "b64", table,
                      instr=ptx.MemoryOp)
    entry = b.emit(f"mul.wide.u32 {{}}, {{}}, {_WORD};", "b64", ctx.reg(pe))
    b.run("add.s64 {}, {}, {};", entry, entry, table)
    return b.emit(f"ld.global.nc.s64 {{}}, [{{}}+{_WORD}];", "b64", entry, instr=ptx.MemoryOp)


def peer_descriptor_address(ctx: KernelLowering, op) -> SSAValue:
    """The descriptor of a peer TMA copy: device `op.peer`'s among its consecutive slots."""
    first = ctx.facts.descriptor_addresses[op.descriptor_index.value.data]
    known = ctx.constant(op.peer)
    if known is not None:
        return ctx.b.emit("add.s64 {}, {}, {};", "b64", first, known * DESCRIPTOR_BYTES) if known else first
    offset = ctx.b.emit(f"mul.wide.u32 {{}}, {{}}, {DESCRIPTOR_BYTES};", "b64", ctx.reg(op.peer))
    return ctx.b.emit("add.s64 {}, {}, {};", "b64", first, offset)


def _cell_address(ctx: KernelLowering, op):
    return window_address(ctx, op.flags, window_offset(ctx, op.flags, op.indices))


def _signal(ctx: KernelLowering, op: ir.SignalOp) -> None:
    b = ctx.b
    address = _cell_address(ctx, op)
    if op.peer is not None:
        address = b.emit("add.s64 {}, {}, {};", "b64", address, peer_offset(ctx, op.peer))
    b.bar("sync", ctx.facts.named_barrier, 128)
    b.append(ptx.ProxyFenceOp("global", ctx.facts.leader))
    form = "st.release.sys.global.u32" if op.op.data == "set" else "red.release.sys.global.add.u32"
    b.run(form + " [{}], {};", address, ctx.operand(op.value), guard=ctx.facts.leader, instr=ptx.MemoryOp)


def _wait_signal(ctx: KernelLowering, op: ir.WaitSignalOp) -> None:
    b = ctx.b
    address = _cell_address(ctx, op)
    expected = ctx.operand(op.value)
    retry = b.new_label("signal")
    b.label(retry)
    held = b.emit("ld.acquire.sys.global.u32 {}, [{}];", "b32", address, instr=ptx.MemoryOp)
    done = b.emit(f"setp.{op.cmp.data}.u32 {{}}, {{}}, {{}};", "pred", held, expected)
    b.branch(retry, done, negate=True)
    b.append(ptx.ProxyFenceOp("global"))


RULES: Rules = {
    ir.DeviceIdOp: _device_id,
    ir.SignalOp: _signal,
    ir.WaitSignalOp: _wait_signal,
}
