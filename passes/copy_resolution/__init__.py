"""How each user-level copy op becomes hardware copies: one module per copy engine.

`RESOLVERS` maps a user-level op class to the function that replaces it; `resolve-transforms`
runs it on every such op. A module for a new copy form registers its op with `@resolves`.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import CopyError
from asyncdsl.passes.copy_resolution.tma import resolve_tma

Resolver = Callable[[Operation], None]
RESOLVERS: dict[type[Operation], Resolver] = {}


def resolves(op_class: type[Operation]) -> Callable[[Resolver], Resolver]:
    def register(resolver: Resolver) -> Resolver:
        RESOLVERS[op_class] = resolver
        return resolver

    return register


@resolves(ir.AsyncCopyOp)
def resolve_copy(copy: ir.AsyncCopyOp) -> None:
    """Replace `copy` by the hardware ops that perform it (raises CopyError if none can)."""
    if copy.implementation.data != "tma":
        raise CopyError(f"implementation={copy.implementation.data!r} copies are not supported yet")
    if copy.oob.data != "zeros":
        raise CopyError(f"oob={copy.oob.data!r} copies are not supported yet")
    if copy.cluster_dims:
        raise CopyError("collective copies are not supported yet")
    resolve_tma(copy)
