"""`resolve-transforms`: turn each user copy into the copy the hardware performs.

Expects: `asyncdsl.async_copy` ops as traced (GMEM slice, transforms, swizzle, barrier).
Guarantees: every tiled TMA copy becomes an `asyncdsl.tma_load` or `asyncdsl.tma_store` whose
descriptor (`#asyncdsl.tma_desc`) views the GMEM argument through the commuted transform chain
(squeezed dims moved to the front, user transforms batched over them, unit dims dropped, leading
squeezed dims collapsed past 5 dims) and whose coordinates are the slice starts pushed through
that chain. Everything TMA cannot do is rejected here with a `CopyError` at the user's line
(rank > 5, box > 256, 16-byte stride and minor-dim rules, swizzle width, SMEM shape mismatch).
The planning itself is `asyncdsl.hw` (one planner per copy engine); `passes/resolve` picks the
engine (`copy.py`) and builds the index arithmetic in IR, one module per engine.

Example: `async_copy(x.at[i, ds(j, 64), :], buf, barrier=bar)` with x: 8x256x128xf32,
buf: 64x128xf32 (dim 0 squeezed, then unit-dropped):

    "asyncdsl.async_copy"(%x, %buf, %i, %j, %c0, %bars, %c0) <{slice_sizes = array<i64: -1, 64, 128>, ...}>

becomes

    "asyncdsl.tma_load"(%buf, %i, %j, %c0, %bars, %c0) <{descriptor = #asyncdsl.tma_desc<arg = 0,
        dims = [8, 256, 128], strides = [131072, 512, 4], box = [1, 64, 128], ...>,
        expect_tx_bytes = 32768 : i64}>
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.errors import AsyncDSLError
from asyncdsl.ir_locations import from_ir_location
from asyncdsl.passes.resolve import copy, im2col, prefetch, row_gather

# The user-level copy ops and what replaces each by hardware copies.
# Each resolver takes an op of the class it is keyed by, which a dict's type cannot say: Any.
RESOLVERS: dict[type[Operation], Callable[[Any], None]] = {
    ir.AsyncCopyOp: copy.resolve_copy,
    ir.AsyncCopyIm2colOp: im2col.resolve_im2col,
    ir.AsyncCopyRowsOp: row_gather.resolve_row_copy,
    ir.AsyncPrefetchOp: prefetch.resolve_prefetch,
}


@dataclass(frozen=True)
class ResolveTransforms(ModulePass):
    name = "resolve-transforms"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in attrs.kernels(op):
            for user_copy in [o for o in fn.walk() if type(o) in RESOLVERS]:
                try:
                    RESOLVERS[type(user_copy)](user_copy)
                except AsyncDSLError as error:
                    raise error.at(from_ir_location(user_copy)) from None
