"""Checks of the shapes a kernel's arguments must have, at trace time, and of the matrices of rows
the row kernels' host functions pick their configuration by.

    import asyncdsl as ad
    from asyncdsl.blocks.shapes import check_rows

    @ad.kernel(grid=(1,))
    def negated(x, y):
        check_rows(("x", x), ("y", y))     # y of x's shape, or a TraceError naming the line
        ad.store(y.at[...], ad.load(x.at[...]) * -1.0)

A kernel reads and writes its arrays in the shape of its input: an output of another shape would
be written only as far as it reaches (TMA clips, bounds checks skip) and the rest left as it was,
a smaller second input read as zeros or not at all.  Such calls are refused when the kernel is
traced, with the rule broken, at the user's line that asked (the kernel's line in the user's own
kernel; the call in the user's code for the library's kernels).
"""

from __future__ import annotations

from typing import Any, Protocol

from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad


class Shaped(Protocol):
    """What the checks read of an argument: a global array at trace time, a host array in the
    library's host functions."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> Any: ...


def check_shape(name: str, array: Shaped, shape: tuple, rule: str) -> None:
    """Refuse the argument `name` unless its shape is `shape`; `rule` says why."""
    if tuple(array.shape) != tuple(shape):
        raise ad.TraceError(f"{name} must have shape {tuple(shape)} ({rule}), got {tuple(array.shape)}",
                            user_location())


def check_rows(source: tuple[str, Shaped], out: tuple[str, Shaped],
               scales: tuple[str, Shaped] | None = None) -> None:
    """A row kernel's arguments, each (name, array): `out` of the `source`'s shape, and `scales`,
    if any, float32, one a row of the source."""
    (source_name, x), (name, array) = source, out
    check_shape(name, array, x.shape, f"one element for each of {source_name}'s")
    if scales is not None:
        name, array = scales
        check_shape(name, array, x.shape[:1], f"one a row of {source_name}")
        if array.dtype != ad.float32:
            raise ad.TraceError(f"{name} must be float32, got {array.dtype}", user_location())


def check_head_groups(heads: int, kv_heads: int) -> None:
    """Attention's query heads in whole groups over its key/value heads (grouped-query attention)."""
    if heads % kv_heads:
        raise ad.TraceError(f"{heads} query heads cannot be grouped over {kv_heads} key/value heads (not a "
                            "divisor)", user_location())


def check_causal_lengths(queries: int, keys: int) -> None:
    """Causal attention's keys: as many as its queries (the diagonal is where they meet)."""
    if keys != queries:
        raise ad.TraceError(f"causal attention takes as many keys as queries, got {keys} keys for {queries} "
                            "queries", user_location())


def row_length(name: str, x) -> int:
    """The length of the rows of `x`, which a host function picks its kernel by: refused, at the
    caller's line, unless x is a matrix of rows that are not empty (of none or more rows: a host
    function launches nothing for none)."""
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) != 2 or not shape[1]:
        got = f"shape {tuple(shape)}" if shape is not None else type(x).__name__
        raise ad.ArgumentError(
            f"{name} must be a matrix of rows (an array of shape (M, N), N >= 1), got {got}",
            user_location())
    return int(shape[1])


def product_shape(a, b, b_is_transposed: bool = False) -> tuple[int, int, int]:
    """(M, N, K) of the product of a (M, K) and b (K, N), or (N, K) where `b_is_transposed`,
    which a GEMM's host function sizes its output and plan by: refused, at the caller's line,
    unless both are matrices (whether their K agree, the kernel checks)."""
    for name, x in (("a", a), ("b", b)):
        shape = getattr(x, "shape", None)
        if shape is None or len(shape) != 2:
            got = f"shape {tuple(shape)}" if shape is not None else type(x).__name__
            raise ad.ArgumentError(f"{name} must be a matrix, got {got}", user_location())
    (m, k), n = a.shape, b.shape[0 if b_is_transposed else 1]
    return int(m), int(n), int(k)
