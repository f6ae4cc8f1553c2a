"""The base of the interpreter's op implementations, and the index values they return.

Each feature module (`core`, `sync`, `copy`, `tma`, ...) holds one `WarpgroupFunctions` subclass
implementing its ops as the warpgroup `warpgroup` executes them: what its PTX lowering
(`passes/to_ptx`) makes the GPU do, as the warpgroup's leader thread issues it.  `grid.FUNCTIONS`
lists them all.  Index values are xDSL's (`IntegerAttr` of `index_bitwidth` bits; the interpreter
runs with 32, the width of the registers the lowering keeps indices in).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from xdsl.dialects.builtin import IndexType
from xdsl.interpreter import Interpreter, InterpreterFunctions
from xdsl.interpreters.builtin import scalar_attr

from asyncdsl.interpret.state import Warpgroup


@dataclass
class WarpgroupFunctions(InterpreterFunctions):
    """Op implementations executed by `warpgroup` (the grid may switch it between CTAs)."""

    warpgroup: Warpgroup


@functools.lru_cache(maxsize=8192)
def _index_attr(value: int, bitwidth: Literal[32, 64]):
    # Attributes are immutable, and building one costs more than the rest of a small op.
    return scalar_attr(value, IndexType(), bitwidth)


def index_value(interpreter: Interpreter, value: int):
    """`value` as the interpreter's index values are held."""
    return _index_attr(value, interpreter.index_bitwidth)
