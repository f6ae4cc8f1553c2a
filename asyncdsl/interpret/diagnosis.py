"""Naming where an interpreted op went wrong: the user's line of the op and the warpgroup.

The memory model (`memory`, `mbarrier`, `races`, the copy modules) raises errors without
context; every op implementation, in the function set of each feature, is wrapped by `diagnosed`, which
names the kernel, CTA, warpgroup and the op's source line.
"""

from __future__ import annotations

import functools

from xdsl.interpreter import Interpreter, PythonValues
from xdsl.ir import Operation

from asyncdsl.errors import AsyncDSLError, DeadlockError
from asyncdsl.ir_locations import from_ir_location


def origin(op: Operation) -> str:
    """The user's source line of `op`, for messages that point at another op."""
    location = from_ir_location(op)
    return str(location) if location is not None else "an unknown line"


def diagnosed(run):
    """Attach the warpgroup (`self.warpgroup`) and the op's line to an error of the memory model."""

    @functools.wraps(run)
    def wrapper(self, interpreter: Interpreter, op: Operation, args: PythonValues):
        try:
            return run(self, interpreter, op, args)
        except DeadlockError:
            raise  # already names every blocked warpgroup
        except AsyncDSLError as error:
            raise self.warpgroup.error(error, from_ir_location(op)) from None

    return wrapper
