"""Lowering of the multi-device ops: the device id, signals and their waits.

A signal is a system-scope release by the warpgroup's leader, after the warpgroup meets (so
that what every thread did before is ordered before it); a wait is a system-scope acquire that
every thread spins on.  Example, `signal(flags.at[i], 1, op="add")` then
`wait_signal(flags.at[j], "ge", 2)`:

    bar.sync %r5, 128;
    @%p1 red.release.sys.global.add.u32 [%rd3], 1;
    L1_signal:
    ld.acquire.sys.global.u32 %r9, [%rd6];
    setp.ge.u32 %p2, %r9, 2;
    @!%p2 bra $L1_signal;

What the GPU cannot do yet, for want of NVSHMEM (the symmetric heap and its peer addresses):
launch on several devices, so `device_id` is 0 in a kernel traced for one device and a kernel
traced for more does not lower; and address a peer's array (a `peer` signal or TMA copy).  Both
raise `NotOnGpuYetError` here, which the kernel keeps for its GPU launches: the
interpreter runs such kernels all the same.
"""

from __future__ import annotations

from xdsl.dialects import func

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.errors import NotOnGpuYetError
from asyncdsl.ir_locations import from_ir_location
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.gmem_addresses import window_address, window_offset


def not_on_gpu_yet(op, what: str) -> NotOnGpuYetError:
    """The error of a multi-device feature the GPU lowering lacks (kept for GPU launches)."""
    return NotOnGpuYetError(
        f"{what} is not supported on the GPU yet: needs NVSHMEM peer addresses (the symmetric heap); "
        "run it with kernel.interpret(..., devices=N)",
        from_ir_location(op),
    )


def _kernel_of(op) -> func.FuncOp:
    parent = op.parent_op()
    while not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    return parent


def _device_id(ctx: KernelLowering, op: ir.DeviceIdOp) -> None:
    devices = attrs.devices(_kernel_of(op))
    if devices > 1:
        raise not_on_gpu_yet(op, f"a kernel traced for {devices} devices")
    ctx.bind(op.result, ctx.b.mov("b32", 0), constant=0)


def _cell_address(ctx: KernelLowering, op):
    return window_address(ctx, op.flags, window_offset(ctx, op.flags, op.indices))


def _signal(ctx: KernelLowering, op: ir.SignalOp) -> None:
    if op.peer is not None:
        raise not_on_gpu_yet(op, "a signal to a peer device")
    b = ctx.b
    address = _cell_address(ctx, op)
    b.run("bar.sync {}, 128;", ctx.facts.named_barrier)
    form = "st.release.sys.global.u32" if op.op.data == "set" else "red.release.sys.global.add.u32"
    b.run(form + " [{}], {};", address, ctx.operand(op.value), guard=ctx.facts.leader)


def _wait_signal(ctx: KernelLowering, op: ir.WaitSignalOp) -> None:
    b = ctx.b
    address = _cell_address(ctx, op)
    expected = ctx.operand(op.value)
    retry = b.new_label("signal")
    b.label(retry)
    held = b.emit("ld.acquire.sys.global.u32 {}, [{}];", "b32", address)
    done = b.emit(f"setp.{op.cmp.data}.u32 {{}}, {{}}, {{}};", "pred", held, expected)
    b.branch(retry, done, negate=True)


RULES: Rules = {
    ir.DeviceIdOp: _device_id,
    ir.SignalOp: _signal,
    ir.WaitSignalOp: _wait_signal,
}
