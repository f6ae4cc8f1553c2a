"""The grid of a kernel's launches, from the `grid=` it was declared with: a tuple, a function of
the call's arguments by name returning one, or `asyncdsl.persistent_grid` (as many CTAs as the
device holds at once: the loaded kernel says how many, `jit/persistent.py`).
"""

from __future__ import annotations

import inspect
import operator
from typing import Any

from asyncdsl import runtime
from asyncdsl.errors import ArgumentError, AsyncDSLError, SourceLocation
from asyncdsl.jit.binding import BoundCall, KernelSignature
from asyncdsl.jit.persistent import PersistentGrid


def dims3(value: Any, what: str, location: SourceLocation | None) -> tuple[int, int, int]:
    """1 to 3 positive integers (numpy integers too, never bools) as (x, y, z)."""
    given = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    try:
        dims = tuple(map(operator.index, given))
    except TypeError:
        dims = ()
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) for d in given) or min(dims) < 1:
        raise ArgumentError(f"{what} must be 1 to 3 positive ints, got {value!r}", location)
    x, y, z = (*dims, 1, 1)[:3]
    return x, y, z


class GridRule:
    """How a kernel's grid follows from a call (see the module docstring)."""

    def __init__(self, grid: Any, signature: KernelSignature, cluster: tuple[int, int, int]):
        self.grid = grid
        self._signature = signature
        self._cluster = cluster

    @property
    def persistent(self) -> bool:
        return isinstance(self.grid, PersistentGrid)

    @property
    def function(self) -> Any:
        """The grid function, or None when the grid does not depend on the arguments."""
        return self.grid if callable(self.grid) else None

    def for_call(self, call: BoundCall, location: SourceLocation | None, loaded=None) -> tuple[int, int, int]:
        """The grid of a launch of `call`; a persistent one is the interpreter's unless `loaded`
        (the loaded kernel) says what the device holds."""
        if isinstance(self.grid, PersistentGrid):
            if loaded is None:
                return self.grid.interpreted(self._cluster)
            return runtime.persistent_grid(loaded)
        if not callable(self.grid):
            return dims3(self.grid, "grid", location)
        try:
            grid = self.grid(**call.by_name())
        except AsyncDSLError as error:
            raise error.at(location) from None
        except Exception as error:  # noqa: BLE001 - the user's function failed: say so at the call
            name = self._signature.kernel_name
            if isinstance(error, TypeError):
                try:
                    inspect.signature(self.grid).bind(**call.by_name())
                except TypeError:
                    raise ArgumentError(
                        f"the grid function of kernel {name} is called with the kernel's arguments "
                        f"by name ({', '.join(self._signature.parameters)}) and cannot take them: {error}; "
                        "give it those parameters (or **kwargs)",
                        location,
                    ) from None
            raise ArgumentError(f"the grid function of kernel {name} raised {type(error).__name__}: "
                                f"{error}", location) from error
        return dims3(grid, "grid", location)
