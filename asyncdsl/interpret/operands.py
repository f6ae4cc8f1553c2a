"""Reading a copy op's operands in the interpreter.

xDSL hands an op implementation its operand values as one flat list; ops with optional or
variadic operand groups are read by SSA value instead, from `operand_values`.
"""

from __future__ import annotations

from typing import Protocol

from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.interpreter import PythonValues
from xdsl.ir import BlockArgument, Operation, SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import InterpretError


class Predicated(Protocol):
    """An op that may carry a predicate operand."""

    @property
    def predicate(self) -> SSAValue | None: ...


class OnBarrier(Protocol):
    """An op that completes on the mbarrier `barriers[barrier_index]`."""

    @property
    def barriers(self) -> SSAValue | None: ...

    @property
    def barrier_index(self) -> SSAValue | None: ...


def operand_values(op: Operation, args: PythonValues) -> dict:
    """Operand values by SSA value."""
    return dict(zip(op.operands, args))


def predicated_off(op: Predicated, values: dict) -> bool:
    """Whether `op` has a predicate and it is false: the warpgroup does not issue it."""
    return op.predicate is not None and not values[op.predicate].value.data


def barrier_address(op: OnBarrier, values: dict) -> int:
    """The shared address of the mbarrier `op` completes on, `barriers[barrier_index]`."""
    return values[op.barriers].address(values[op.barrier_index].value.data)


def memref_of(value: SSAValue) -> MemRefType:
    """The memref type of `value`, an array or buffer operand."""
    if not isinstance(value.type, MemRefType):
        raise InterpretError(f"expected a memref operand, got {value.type}")
    return value.type


def vector_of(value: SSAValue) -> VectorType:
    """The vector type of `value`, a register tile operand."""
    if not isinstance(value.type, VectorType):
        raise InterpretError(f"expected a register tile operand, got {value.type}")
    return value.type


def argument_index(value: SSAValue) -> int:
    """The kernel parameter `value` is (the ops that name a kernel's array by its parameter)."""
    if not isinstance(value, BlockArgument):
        raise InterpretError(f"expected a kernel parameter, got {value}")
    return value.index


def allocated_offset(op: ir.AllocSmemOp | ir.AllocBarriersOp) -> int:
    """The shared-memory offset `allocate_smem` gave the allocation `op` (the interpreter runs
    allocated kernels only)."""
    if op.offset is None:
        raise InterpretError(f"{op.name} has no shared-memory offset: the kernel was not allocated")
    return op.offset.value.data
