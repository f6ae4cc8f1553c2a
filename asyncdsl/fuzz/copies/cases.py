"""One fuzz case as data: the copy a generated kernel makes, and the launch around it.

A case is a single `ad.async_copy` between a GMEM array and an SMEM buffer, plus what the
harness around it needs: a load's buffer is dumped to an output array (so every SMEM byte is
observed, swizzle and untouched bytes included), a store's buffer is first filled from an
input array with raw bytes.  `render.py` turns a case into kernel source, `model.py` says what
it must do, `generate.py` draws cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .expr import Const, Expr
from .layout import ELEMENT_TYPES, ElementType, Transform

# -- the index key of `x.at[...]` -------------------------------------------------------------


@dataclass(frozen=True)
class Squeeze:
    """An integer index: the dim is squeezed away."""

    index: Expr


@dataclass(frozen=True)
class Window:
    """`ad.ds(start, size)`."""

    start: Expr
    size: int


@dataclass(frozen=True)
class Span:
    """A static slice `lo:hi` (`:` when both are None)."""

    lo: int | None = None
    hi: int | None = None


@dataclass(frozen=True)
class Rest:
    """`...`: the dims left over."""


Entry = Squeeze | Window | Span | Rest


@dataclass(frozen=True)
class Condition:
    """A traced predicate `lhs <op> rhs`."""

    lhs: Expr
    op: str  # == != < >=
    rhs: int


REDUCTIONS = ("add", "min", "max", "umin", "umax", "smin", "smax", "inc", "dec", "and", "or", "xor")


@dataclass(frozen=True)
class Case:
    name: str
    direction: str  # "load" (GMEM -> SMEM) or "store" (SMEM -> GMEM)
    dtype: str  # an attribute of asyncdsl (and of layout.ELEMENT_TYPES)
    gmem_shape: tuple[int, ...]
    key: tuple[Entry, ...] | None  # None: the whole array, passed without .at
    smem_shape: tuple[int, ...]  # the copy's SMEM side
    transforms: tuple[Transform, ...] = ()
    swizzle: int | None = None
    # slots > 0: the buffer holds `slots` buffers of smem_shape and the copy uses buf.at[slot].
    slots: int = 0
    slot: Expr = Const(0)
    grid: tuple[int, int, int] = (1, 1, 1)
    cluster: tuple[int, int, int] = (1, 1, 1)
    arch: str = "sm_90a"
    collective: tuple[str, ...] = ()
    partition: str | None = None  # "replicated" or "partitioned" (along axis 0)
    implementation: str = "tma"
    oob: str = "zeros"
    predicate: Condition | None = None
    reduction: str | None = None
    arrive: bool = True  # False: the kernel announces the bytes itself (loads)
    barrier: bool = True  # cp.async only: False completes in a commit group
    compile_only: bool = False  # arrays too large to run: compile and assemble only
    # A misuse of the API spliced into the source: (where, text), where is "copy-option" (one
    # more keyword of the copy), "key" (the whole index key), "transforms" or "kernel-option".
    misuse: tuple[str, str] | None = None
    aims: tuple[str, ...] = field(default=())  # what the generator steered towards

    @property
    def scenario(self) -> str:
        return self.aims[0] if self.aims else ""

    @property
    def element(self) -> ElementType:
        return ELEMENT_TYPES[self.dtype]

    @property
    def buffer_shape(self) -> tuple[int, ...]:
        return (self.slots, *self.smem_shape) if self.slots else self.smem_shape

    @property
    def num_ctas(self) -> int:
        return math.prod(self.grid)

    @property
    def needs_fill(self) -> bool:
        """Whether a load may leave buffer bytes alone: then the harness fills the buffer
        first, so that those bytes are known (a GPU's fresh shared memory is not)."""
        return self.direction == "load" and bool(
            self.predicate is not None or self.slots or self.oob == "undefined"
        )
