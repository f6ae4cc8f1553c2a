"""How each user-level copy op becomes hardware copies: one module per copy engine.

`RESOLVERS` maps a user-level op class to the function that replaces it; `resolve-transforms`
runs it on every such op. A module for a new copy form registers its op with `@resolves`.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.passes.resolve.bulk import resolve_bulk, takes_bulk_path
from asyncdsl.passes.resolve.collective import is_collective, resolve_collective_copy
from asyncdsl.passes.resolve.cp_async import resolve_cp_async
from asyncdsl.passes.resolve.im2col import resolve_im2col
from asyncdsl.passes.resolve.prefetch import resolve_prefetch
from asyncdsl.passes.resolve.row_gather import resolve_row_copy
from asyncdsl.passes.resolve.tma import resolve_tma

Resolver = Callable[[Operation], None]
RESOLVERS: dict[type[Operation], Resolver] = {}


def resolves(op_class: type[Operation]) -> Callable[[Resolver], Resolver]:
    def register(resolver: Resolver) -> Resolver:
        RESOLVERS[op_class] = resolver
        return resolver

    return register


resolves(ir.AsyncCopyIm2colOp)(resolve_im2col)
resolves(ir.AsyncCopyRowsOp)(resolve_row_copy)
resolves(ir.AsyncPrefetchOp)(resolve_prefetch)


@resolves(ir.AsyncCopyOp)
def resolve_copy(copy: ir.AsyncCopyOp) -> None:
    """Replace `copy` by the hardware ops that perform it (raises CopyError if none can).

    The engine, as the reference picks it: cp.async when asked for; a plain bulk copy when the
    caller gave up zero fill (`oob` other than "zeros", the default) and the slice is one
    contiguous run needing no tensor map; tiled TMA (which zero-fills) otherwise.
    """
    if is_collective(copy):
        resolve_collective_copy(copy)
        return
    if copy.implementation.data == "cp_async":
        resolve_cp_async(copy)
        return
    if takes_bulk_path(copy):
        resolve_bulk(copy)
        return
    resolve_tma(copy)
