"""Moving register tiles to and from memory: `asyncdsl.load` and `asyncdsl.store`.

    x = ad.load(buf.at[stage], layout=ad.WGMMA)    # the same as buf.at[stage][...], in WGMMA layout
    ad.store(out_buf, y)                          # the same as out_buf[...] = y

Shared memory is read and written whole (a buffer or a leading-index view of one) by ordinary
loads and stores of the 128 threads: generic-proxy accesses, so a TMA store of what they wrote
needs `asyncdsl.fence_async_smem()` first.
"""

from __future__ import annotations

from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend.refs import SmemRef
from asyncdsl.frontend.tiles import RegisterTile
from asyncdsl.hw.fragments import Layout


def _smem(ref, what: str) -> SmemRef:
    if not isinstance(ref, SmemRef):
        raise TraceError(
            f"{what} moves register tiles to and from shared-memory buffers (asyncdsl.smem), got {ref!r}",
            user_location(),
        )
    return ref


def load(ref: SmemRef, layout: Layout | None = None) -> RegisterTile:
    """The contents of shared-memory buffer `ref` as a register tile, in `layout` (or inferred)."""
    return _smem(ref, "asyncdsl.load").load(layout)


def store(ref: SmemRef, tile: RegisterTile) -> None:
    """Write `tile` into shared-memory buffer `ref` (same shape and dtype)."""
    _smem(ref, "asyncdsl.store").store(tile)
