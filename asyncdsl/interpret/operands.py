"""Reading a copy op's operands in the interpreter.

xDSL hands an op implementation its operand values as one flat list; ops with optional or
variadic operand groups are read by SSA value instead, from `operand_values`.
"""

from __future__ import annotations

from xdsl.interpreter import PythonValues
from xdsl.ir import Operation


def operand_values(op: Operation, args: PythonValues) -> dict:
    """Operand values by SSA value."""
    return dict(zip(op.operands, args))


def predicated_off(op: Operation, values: dict) -> bool:
    """Whether `op` has a predicate and it is false: the warpgroup does not issue it."""
    return op.predicate is not None and not values[op.predicate].value.data


def barrier_address(op: Operation, values: dict) -> int:
    """The shared address of the mbarrier `op` completes on, `barriers[barrier_index]`."""
    return values[op.barriers].address(values[op.barrier_index].value.data)
