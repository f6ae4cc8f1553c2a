"""A ring of key and value blocks gathered page by page from a paged KV cache, laid out so that
the tensor cores take a whole block in one wgmma whatever the page size.

    import asyncdsl as ad
    from asyncdsl.blocks.paged_loads import PagedLoads

    @ad.kernel(block=256)                            # consumer 0, producer 1
    def summed(q, cache, table, out):                # out = Σ_j q @ k_jᵀ @ v_j, pages of 16, keys = values
        loads = PagedLoads(rows=64, block=64, page=16, d=128, stages=2)
        blocks = table.shape[0] // 4                 # four pages a block
        with ad.warpgroup_role(1):
            for j in ad.range(blocks):
                pages = [ad.load_index(table.at[4 * j + i]) for i in range(4)]
                loads.load(j, pages, lambda i, page, c: cache.at[page, :, ad.ds(64 * c, 64)],
                           lambda i, page: cache.at[page, :, :])
        with ad.warpgroup_role(0):
            loads.write_query(lambda c: ad.load(q.at[:, ad.ds(64 * c, 64)], layout=ad.WGMMA))
            s = ad.registers((64, 64), ad.float32, layout=ad.WGMMA)
            acc = ad.registers((64, 128), ad.float32, layout=ad.WGMMA)
            acc[...] = ad.zeros((64, 128), ad.float32)
            for j in range(blocks):
                slot = loads.slot(j)
                loads.wait_keys(slot)
                loads.scores(s, slot)
                ad.wgmma_wait(0)
                loads.release_keys(slot)
                loads.wait_values(slot)
                ad.wgmma(acc, s[...].astype(ad.bfloat16), loads.values(slot))
                ad.wgmma_wait(0)
                loads.release_values(slot)
            ad.store(out, acc[...])

Block j (BK = `block` keys) lies in slot j % stages.  A page's rows are contiguous in the cache,
its neighbours' are not, so each page is copied on its own into its rows of the slot: the keys
one TMA copy a page and 64 columns (the slot holds them one 64-column chunk after the other,
each chunk's rows in page order, which is how a wgmma reads BK keys of one chunk at once), the
values one copy a page (the slot holds them page after page, each page's chunks side by side,
which is how a wgmma's K steps of 16 keys read them).  q is held the keys' way, one 64-column
chunk after the other, so q kᵀ is one wgmma a chunk (a window of q's columns) into the same
scores.  A page of a block's size or more is one copy a block.  `fill` writes a block with the
threads instead (a cache of another dtype converted on the way).  With `parts` consumer
warpgroups, each has a q tile of its own and every one of them releases each slot; q is
written by them (`write_query`) or copied in by the producer (`load_query`, `query_copied`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from asyncdsl.blocks.kv_ring import KeyValueRing
from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.frontend import language as ad

CHUNK = 64  # columns a swizzled row of bf16 holds: the keys' and q's chunks
FILL_ROWS = 16  # rows `fill` writes at a time: few registers for the producer's threads
GATHERS = ("tma", "cp_async")  # how `load` may copy the pages


class PagedLoads(KeyValueRing):
    """q (`parts` tiles of `rows` × `d`, one a consumer warpgroup) and a ring of `stages` slots of
    `block` keys and values (bf16, `d` a multiple of 64) gathered from pages of `page` positions;
    `filled`: the producer writes the slots with its threads (`fill`) rather than copying them
    (`load`); `gather`: how `load` copies, "tma" (a copy a page and chunk) or "cp_async" (the
    producer's threads, 16 bytes at a time, one arrival a block; the consumer's waits then fence
    the slot for the tensor cores); `query_copied`: q is copied in (`load_query`) rather than
    written by the consumers (`write_query`).  Make it at the kernel's top level."""

    def __init__(self, rows: int, block: int, page: int, d: int, stages: int, filled: bool = False,
                 parts: int = 1, query_copied: bool = False, gather: str = "tma"):
        if d % CHUNK or (block % page and page % block):
            raise ad.TraceError(f"paged loads take head dims of whole {CHUNK}-column chunks and blocks of "
                                f"whole pages (or pages of whole blocks), got d={d}, block={block}, "
                                f"page={page}")
        if gather not in GATHERS:
            raise ad.TraceError(f"paged loads gather pages by 'tma' or 'cp_async', got {gather!r}")
        self.block, self.chunks, self.gather = block, d // CHUNK, gather
        # The consumer fences what cp.async gathered; `fill` fences its own writes.
        self.fenced_by_consumer = gather == "cp_async" and not filled
        self.piece = min(block, page)  # rows a copy lands: a page, or a block of a larger page
        self.pieces = block // self.piece
        # [consumer]: each tile's 64-column chunks one after the other, the keys' way
        self.q = ad.smem((parts, rows, d), ad.bfloat16, **tensor_core_layout(rows))
        if query_copied:
            self.query_landed = ad.barrier(arrival_count=parts)
        tile = FILL_ROWS if filled else self.piece  # rows a window of the slots may start at
        self.k = ad.smem((stages, self.chunks, block, CHUNK), ad.bfloat16, **tensor_core_layout(tile))
        self.v = ad.smem((stages, block, d), ad.bfloat16, **tensor_core_layout(tile))
        # Arrivals a slot's keys, values: a TMA copy is one each; the threads' writes and cp.async
        # gathers arrive once for the whole block (a warpgroup meeting each, not one a copy).
        copies = (1, 1) if filled or gather == "cp_async" else (self.pieces * self.chunks, self.pieces)
        super().__init__(stages, *copies, consumers=parts)

    def _rows(self, buffer, i):
        """Piece i's rows of a slot's (block, ...) buffer."""
        return buffer if self.pieces == 1 else buffer.at[ad.ds(i * self.piece, self.piece), :]

    def load(self, j, pages: Sequence, keys: Callable, values: Callable) -> None:
        """For the producer: copy block j's keys, then its values, into its slot, each once the
        consumer released what the slot held.  `pages` holds each piece's page (read before the
        first wait, so those reads' latency is spent once a block, behind the waits); `keys(i,
        page, c)` gives the GMEM view of chunk c of piece i's keys (`piece` × 64), `values(i,
        page)` its values (`piece` × d)."""
        slot = self.slot(j)
        with ad.region("wait k slot"), ad.when(j >= self.stages):
            self.k_empty[slot].wait()
        by_threads = self.gather == "cp_async"
        for i, page in enumerate(pages):
            for c in range(self.chunks):
                ad.async_copy(keys(i, page, c), self._rows(self.k.at[slot, c], i), barrier=self.k_full[slot],
                              implementation=self.gather, arrive=not by_threads)
        if by_threads:
            self.k_full[slot].arrive()  # once every thread's gathers are tracked by the barrier
        with ad.region("wait v slot"), ad.when(j >= self.stages):
            self.v_empty[slot].wait()
        for i, page in enumerate(pages):
            ad.async_copy(values(i, page), self._rows(self.v.at[slot], i), barrier=self.v_full[slot],
                          implementation=self.gather, arrive=not by_threads)
        if by_threads:
            self.v_full[slot].arrive()

    def fill(self, j, keys: Callable, values: Callable) -> None:
        """For the producer (of `filled` loads): write block j's keys and values into its slot
        with the threads, as `load` copies them, `FILL_ROWS` rows at a time.  `keys(r, c)` gives
        chunk c of the block's keys r.. (`FILL_ROWS` × 64), `values(r)` their values
        (`FILL_ROWS` × d), register tiles in bf16, each traced after the wait for the slot."""
        slot = self.slot(j)

        def rows(buffer, r):
            return buffer.at[ad.ds(r, FILL_ROWS), :]

        for empty, full, write in (
                (self.k_empty, self.k_full,
                 lambda r: [rows(self.k.at[slot, c], r).store(keys(r, c)) for c in range(self.chunks)]),
                (self.v_empty, self.v_full, lambda r: rows(self.v.at[slot], r).store(values(r)))):
            with ad.when(j >= self.stages):
                empty[slot].wait()
            for r in ad.range(self.block // FILL_ROWS):  # a loop: ptxas would hoist an unrolled one's loads
                write(r * FILL_ROWS)
            ad.fence_async_smem()  # the tensor cores read what the threads wrote
            full[slot].arrive()

    def wait_keys(self, slot) -> None:
        """For a consumer: wait until the keys in `slot` have landed (gathered by the threads'
        cp.async, which writes through the generic proxy: then fenced for the tensor cores)."""
        super().wait_keys(slot)
        if self.fenced_by_consumer:
            ad.fence_async_smem()

    def wait_values(self, slot) -> None:
        """For a consumer: wait until the values in `slot` have landed (fenced as the keys)."""
        super().wait_values(slot)
        if self.fenced_by_consumer:
            ad.fence_async_smem()

    def load_query(self, part, rows) -> None:
        """For the producer (of `query_copied` loads): copy `rows` (a GMEM ref of `rows` × `d`)
        into q's tile `part`, landing on `query_landed`."""
        ad.async_copy(rows, self.q.at[part], barrier=self.query_landed)

    def write_query(self, chunk: Callable, part=0) -> None:
        """For a consumer: write its q tile, `chunk(c)` its columns 64c.. (`rows` × 64, bf16
        registers)."""
        for c in range(self.chunks):
            self._chunk(self.q.at[part], c).store(chunk(c))
        ad.fence_async_smem()  # the tensor cores read what the threads wrote

    def scores(self, s, slot, part=0) -> None:
        """For a consumer: issue s = q kᵀ of its q tile over the keys in `slot`, a wgmma group a
        chunk."""
        for c in range(self.chunks):
            ad.wgmma(s, self._chunk(self.q.at[part], c), self.k.at[slot, c].T, accumulate=c > 0)

    def _chunk(self, tile, c):
        """Columns 64c.. of a q tile (the tile itself where it has no others)."""
        return tile.at[:, ad.ds(c * CHUNK, CHUNK)]
