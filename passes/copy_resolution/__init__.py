"""How each user copy becomes hardware copies: one module per copy engine, chosen here."""

from __future__ import annotations

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.passes.copy_resolution.tma import resolve_tma

from asyncdsl.errors import CopyError


def resolve_copy(copy: ir.AsyncCopyOp) -> None:
    """Replace `copy` by the hardware ops that perform it (raises CopyError if none can)."""
    if copy.implementation.data != "tma":
        raise CopyError(f"implementation={copy.implementation.data!r} copies are not supported yet")
    if copy.oob.data != "zeros":
        raise CopyError(f"oob={copy.oob.data!r} copies are not supported yet")
    if copy.cluster_dims:
        raise CopyError("collective copies are not supported yet")
    resolve_tma(copy)
