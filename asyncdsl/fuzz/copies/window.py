"""What `x.at[key]` selects, per CTA: the reference's reading of the indexing rules.

- a computed index and an `ad.ds(start, size)` start are TMA coordinates (README,
  docs/hardware.md §3.3): never wrapped the way Python wraps negative indices; a negative one,
  or one past the dim, is out of bounds: loads read zeros there, stores clip what lies past the
  high end (a store at a negative coordinate is refused instead: `rules.py`);
- a literal integer index is numpy's, as a literal slice is: a negative one counts from the end
  (`x.at[-1, :]` is the last row), below `-size` it is refused; one past the dim is a coordinate
  out of bounds as above;
- `ad.ds(start, size)` is a window of `size` from `start`, which may leave the array;
- a static slice `lo:hi` and `...` follow numpy (negative bounds count from the end).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import expr
from .cases import Case, Rest, Span, Squeeze, Window


class UserError(Exception):
    """The case breaks a rule of the API: no run may succeed.  `compile_time`: the rule can be
    checked while compiling, so the compiler must be the one to refuse."""

    def __init__(self, reason: str, compile_time: bool = True):
        super().__init__(reason)
        self.reason = reason
        self.compile_time = compile_time


@dataclass(frozen=True)
class Dim:
    """How one GMEM dim is indexed: a window (`size` set) or a squeezed index."""

    start: expr.Expr  # the window's start or the index: a coordinate, never wrapped
    size: int | None  # None: squeezed

    @property
    def squeezed(self) -> bool:
        return self.size is None

    @property
    def traced(self) -> bool:
        return expr.is_traced(self.start)

    @property
    def extent(self) -> int:
        return 1 if self.size is None else self.size


def resolve_key(case: Case) -> tuple[Dim, ...]:
    """One Dim per GMEM dim; raises UserError for keys numpy-style indexing refuses."""
    shape = case.gmem_shape
    if case.key is None:
        return tuple(Dim(expr.Const(0), size) for size in shape)
    entries = list(case.key)
    rests = sum(isinstance(e, Rest) for e in entries)
    if rests > 1:
        raise UserError("more than one '...' in an index")
    if rests:
        at = next(i for i, e in enumerate(entries) if isinstance(e, Rest))
        fill = max(0, len(shape) - (len(entries) - 1))
        entries[at : at + 1] = [Span()] * fill
    if len(entries) > len(shape):
        raise UserError(f"{len(entries)} indices for a {len(shape)}-d array")
    entries += [Span()] * (len(shape) - len(entries))
    dims = []
    for entry, size in zip(entries, shape):
        if isinstance(entry, Squeeze):
            literal = None if expr.is_traced(entry.index) else expr.static_value(entry.index)
            if literal is not None and literal < -size:
                raise UserError(f"literal index {literal} below -{size}, the first element of its dim")
            if literal is not None and literal < 0:
                dims.append(Dim(expr.Const(literal + size), None))
            else:
                dims.append(Dim(entry.index, None))
        elif isinstance(entry, Window):
            dims.append(Dim(entry.start, entry.size))
        else:
            assert isinstance(entry, Span)
            lo, hi, _ = slice(entry.lo, entry.hi).indices(size)
            if hi <= lo:
                raise UserError(f"empty slice {entry.lo}:{entry.hi} of a dim of {size}")
            dims.append(Dim(expr.Const(lo), hi - lo))
    return tuple(dims)


def window_shape(dims: tuple[Dim, ...]) -> tuple[int, ...]:
    """The window's shape with squeezed dims gone: what the transforms see."""
    return tuple(d.size for d in dims if d.size is not None)


def window_gmem_dims(dims: tuple[Dim, ...]) -> list[int]:
    """The GMEM dim of each window dim."""
    return [i for i, d in enumerate(dims) if not d.squeezed]
