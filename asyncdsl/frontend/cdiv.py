"""Ceiling division, the one helper of kernel code that host code uses too (grid functions).

It lives apart from the tracing operations (`frontend/core.py`), which import the IR dialects:
a grid function runs on every launch, also the first one of a process that takes its kernel
from the disk cache, and importing xDSL's dialects there cost that call half a second on the
GPU machine (docs/hardware.md §19).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from asyncdsl.errors import TraceError, user_location

if TYPE_CHECKING:  # only the checker reads it: importing it here is what this module avoids
    from asyncdsl.frontend.scalars import Scalar

Index = TypeVar("Index", int, "Scalar")  # a Python int, or a traced index


def cdiv(a: Index, b: Index) -> Index:
    """Ceiling division, for Python ints (grids) and traced indices alike."""
    if isinstance(b, int) and b == 0:
        raise TraceError(f"asyncdsl.cdiv({a!r}, 0): division by zero", user_location())
    return (a + b - 1) // b
