"""Kernels that run on several devices at once (the CPU interpreter emulates them; the GPU
needs NVSHMEM, not there yet: `passes/to_ptx/distributed.py`).

Every array argument is symmetric: each device holds one of the same shape and dtype, and
`x.peer(pe)` (`refs.GmemRef.peer`) is device `pe`'s, for `async_copy` (tiled TMA, reductions
included) and `signal`.  Devices order their work with 32-bit flags in an int32/uint32 argument:

    ad.async_copy(shard, out.peer(pe).at[ds(rank * n, n)])   # write into a peer
    ad.await_async_copy()                                     # the writes are done ...
    ad.signal(flags.peer(pe).at[rank], 1)                     # ... before the flag says so
    ad.wait_signal(flags.at[src], "ge", 1)                    # and a peer's writes are seen after

Run with `kernel.interpret(*per_device_arrays, devices=N)`.
"""

from __future__ import annotations

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.distributed_ops import SIGNAL_OPS, WAIT_COMPARISONS
from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.refs import GmemRef, GmemView
from asyncdsl.frontend.scalars import IndexLike, Scalar, int32_index, is_index

_FLAG_DTYPES = (dtypes.int32, dtypes.uint32)


def device_id() -> Scalar:
    """This device's rank, 0 .. num_devices() - 1 (a traced index)."""
    return Scalar(tracing.current("asyncdsl.device_id").emit(ir.DeviceIdOp()).results[0])


def num_devices() -> int:
    """How many devices run the kernel (a Python int: the kernel is traced for each count)."""
    return tracing.current("asyncdsl.num_devices").launch.devices


def _cell(target: object, what: str) -> GmemView:
    """`target` as one 32-bit integer cell of a kernel array argument."""
    if isinstance(target, GmemRef):
        if target.shape != (1,):
            raise TraceError(f"{what} takes one cell: index it, {target.name}.at[i]", user_location())
        target = target.at[0]
    if not isinstance(target, GmemView):
        raise TraceError(
            f"{what} takes one cell of a kernel array argument (flags.at[i]), got {type(target).__name__}",
            user_location(),
        )
    if not all(d.squeezed for d in target.dims):
        raise TraceError(
            f"{what} takes one cell: index every dim of {target.ref.name} with an integer, got a window",
            user_location(),
        )
    if target.dtype not in _FLAG_DTYPES:
        raise TraceError(f"{what} takes an int32 or uint32 cell, {target.ref.name} holds {target.dtype}",
                         user_location())
    return target


def _value(value: IndexLike, what: str):
    if not is_index(value):
        raise TraceError(f"{what}: the value must be a Python int or a traced index, got {value!r}",
                         user_location())
    if isinstance(value, int) and not 0 <= value < 2**31:
        raise TraceError(f"{what}: the value must be in 0 .. 2**31 - 1, got {value}", user_location())
    return int32_index(value)


def signal(target: object, value: IndexLike, op: str = "set") -> None:
    """Set (`op="set"`) or add `value` to (`op="add"`) the flag `target` (`flags.at[i]` or
    `flags.peer(pe).at[i]`), after everything this warpgroup did before it: a release, so a
    device that sees the flag sees those writes.  TMA stores must be awaited
    (`await_async_copy()`) before the signal that announces them."""
    what = "asyncdsl.signal"
    tracer = tracing.current(what)
    cell = _cell(target, what)
    if op not in SIGNAL_OPS:
        raise TraceError(f"{what}: op must be 'set' or 'add', got {op!r}", user_location())
    peer = cell.ref.peer_index
    tracer.emit(ir.SignalOp(
        cell.ref.argument, [int32_index(d.start) for d in cell.dims], _value(value, what), op,
        peer=None if peer is None else int32_index(peer),
    ))


def wait_signal(target: object, cmp: str, value: IndexLike) -> None:
    """Wait until this device's flag `target` (`flags.at[i]`) is `value` (`cmp="eq"`) or at
    least `value` (`"ge"`, unsigned), then see what its signaller did before (an acquire)."""
    what = "asyncdsl.wait_signal"
    tracer = tracing.current(what)
    cell = _cell(target, what)
    if cell.ref.peer_index is not None:
        raise TraceError(f"{what} waits on this device's flags only (no .peer): peers signal into them",
                         user_location())
    if cmp not in WAIT_COMPARISONS:
        raise TraceError(f"{what}: cmp must be 'eq' or 'ge', got {cmp!r}", user_location())
    tracer.emit(ir.WaitSignalOp(cell.ref.argument, [int32_index(d.start) for d in cell.dims],
                                _value(value, what), cmp))
