"""Ops for kernels that run on several devices at once and touch each other's memory.

Every array argument is symmetric: each device holds one of the same shape at the same place of
its symmetric heap (NVSHMEM's model), so "argument `x` on device `pe`" names memory.  The IR
says so with an optional `peer` index operand on the ops that address a GMEM argument: the
user's `async_copy` and the `tma_load` / `tma_store` it resolves into, and the signal below.
Without it the op addresses this device's array, as always.

    asyncdsl.device_id               this device's rank (an index, 0 .. devices - 1)
    asyncdsl.signal                  one 32-bit cell of a GMEM argument (on `peer`, else here)
                                     set to / increased by `value`, with release semantics
    asyncdsl.wait_signal             spin until this device's cell compares `cmp` ("eq", "ge")
                                     with `value`, with acquire semantics

How many devices a kernel is traced for is the kernel attribute `asyncdsl.devices`
(`kernel_attrs.devices`, 1 when absent); `asyncdsl.num_devices()` is that Python int.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType, MemRefType, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, var_operand_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.copy_bases import PeerArray
from asyncdsl.dialects.ir_utils import IndexQuery, SegmentedOperands, optional_operand, verify_int32_element

SIGNAL_OPS = ("set", "add")
WAIT_COMPARISONS = ("eq", "ge")


@irdl_op_definition
class DeviceIdOp(IndexQuery):
    """This device's rank among the devices the kernel runs on."""

    name = "asyncdsl.device_id"


class _SignalCell(SegmentedOperands):
    """An op on the 32-bit cell `flags[indices]` of a GMEM array argument, with the operand
    `value`."""

    flags = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    value = operand_def(IndexType)

    def verify_cell(self, subject: str) -> None:
        verify_int32_element(self.flags, self.indices, subject, "addresses", "cells")


@irdl_op_definition
class SignalOp(_SignalCell, PeerArray):
    """Set (`op = "set"`) or add to (`"add"`) the 32-bit cell `flags[indices]` on device `peer`
    (this device without it), after everything this warpgroup did before (release)."""

    name = "asyncdsl.signal"

    op = prop_def(StringAttr)

    def __init__(self, flags: SSAValue, indices: Sequence[SSAValue], value: SSAValue, op: str,
                 peer: SSAValue | None = None):
        super().__init__(operands=[flags, indices, value, optional_operand(peer)],
                         properties={"op": StringAttr(op)})

    def verify_(self) -> None:
        self.verify_cell("a signal")
        if self.op.data not in SIGNAL_OPS:
            raise VerifyException(f"a signal sets or adds ({', '.join(SIGNAL_OPS)}), not {self.op.data!r}")


@irdl_op_definition
class WaitSignalOp(_SignalCell):
    """Spin until this device's 32-bit cell `flags[indices]` compares `cmp` with `value`
    (unsigned), then see everything the signaller did before its signal (acquire)."""

    name = "asyncdsl.wait_signal"

    cmp = prop_def(StringAttr)

    def __init__(self, flags: SSAValue, indices: Sequence[SSAValue], value: SSAValue, cmp: str):
        super().__init__(operands=[flags, indices, value], properties={"cmp": StringAttr(cmp)})

    def verify_(self) -> None:
        self.verify_cell("a signal wait")
        if self.cmp.data not in WAIT_COMPARISONS:
            raise VerifyException(
                f"a signal wait compares with {', '.join(WAIT_COMPARISONS)}, not {self.cmp.data!r}")


OPERATIONS: tuple[type[Operation], ...] = (DeviceIdOp, SignalOp, WaitSignalOp)
