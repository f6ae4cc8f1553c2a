"""Reading a paged KV cache: the keys (or values) of one block of positions of one sequence,
gathered through its block table, as serving engines lay the cache out.

    import asyncdsl as ad
    from asyncdsl.blocks.paged_kv import PagedSequence

    @ad.kernel(grid=lambda cache, table, lens, out, BK: (table.shape[0],))
    def unpaged(cache, table, lens, out, BK: ad.constexpr):  # out[b]: head 0 of sequence b, dense
        seq = PagedSequence(table, lens, ad.program_id(0), cache.shape[0], cache.shape[1])
        length = seq.length(BK)
        for j in range(out.shape[1] // BK):
            block = seq.block(j * BK, BK, length)
            ad.store(out.at[ad.program_id(0), ad.ds(j * BK, BK), :], block.rows(cache, 0))

The cache is (pages, page_size, H_kv, D); position t of sequence b lies on page
`table[b, t // page_size]`, row t % page_size.  `blocks` counts the sequence's blocks,
`split_blocks` gives the blocks a split of the sequence walks, bounded by its own length,
`page` the page of a position (read with `asyncdsl.load_index`, a traced coordinate; a position
past the sequence's last page reads that page) and `box` the view of positions on one page that
one TMA copy takes.  A
`PagedBlock` is BK positions from `first`: their pages, looked up once, and whether each holds
a key that exists (before the length, on a page inside the cache), which attention uses to hide
the others.  `rows` gathers one head of the block's keys or values with the threads (for a
block across pages, or a cache converted on the way), reading only the positions that exist: an
entry past the cache or negative, or a length past the table, reads nothing (those rows are
zeros), so a bad table never reads outside the cache.  `check` states that the table is good,
which the interpreter (and a kernel compiled with ASYNCDSL_DEBUG=1) reports as an
`AssumptionError` where it is not; entries past a sequence's last page are never looked at.
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


class PagedSequence:
    """Sequence `b` of a batch whose block table is `table` (B, max_pages) int32 and lengths
    `lens` (B,) int32, over a cache of `pages` pages of `page_size` positions."""

    def __init__(self, table, lens, b, pages: int, page_size: int):
        self.table, self.lens, self.b, self.pages, self.page_size = table, lens, b, pages, page_size
        self.capacity = table.shape[1] * page_size  # positions the table can name

    def stored_length(self, rows: int, layout=None):
        """The sequence's length as stored, an int32 tile of `rows` equal elements."""
        return ad.load(self.lens.at[ad.zeros((rows,), ad.int32, layout=layout) + self.b], layout=layout)

    def length(self, rows: int, layout=None):
        """The length clamped to what the table can name (`rows` equal elements): read it once,
        before a loop over blocks, and hand it to each `block`."""
        return ad.minimum(self.stored_length(rows, layout), self.capacity)

    def blocks(self, size: int):
        """The sequence's blocks of `size` positions, a traced index: its length read as an
        index and cut to the table (a negative one counts none)."""
        return (ad.load_index(self.lens.at[self.b]).min(self.capacity).max(0) + size - 1) // size

    def split_blocks(self, size: int, split, splits: int):
        """(first, count): the blocks of `size` positions that split `split` of `splits` takes,
        its share of the sequence's own blocks (the length read as an index, cut to the table),
        so that a short sequence costs a few blocks and no entry past the table is read."""
        blocks = self.blocks(size)
        per_split = (blocks + splits - 1) // splits
        first = split * per_split
        return first, (blocks - first).min(per_split).max(0)

    def last_entry(self):
        """The table entry of the sequence's last page (its length cut to the table; entry 0 for
        an empty sequence), an index for `box`: read it once, before a loop of copies."""
        return (ad.load_index(self.lens.at[self.b]).min(self.capacity).max(1) - 1) // self.page_size

    def page(self, first, last):
        """The page holding position `first`, a traced index for `box`.  `last` is
        `last_entry()`: a block's positions past the sequence's last page (its last block, where
        the length is not whole blocks of several pages) read that page again and are hidden as
        past the length, so the padding entries after it are never read, nor rows of the table
        past it.  An entry outside the cache gives its nearest page, whose keys
        `PagedBlock.present` hides: no coordinate is out of bounds (a copy that merges dims would
        alias one).  Look a block's pages up before waiting for the slots they fill: each is a
        read of global memory, and a producer that reads one after each wait spends that
        latency once a page instead of once a block."""
        entry = first // self.page_size
        entry = last.min(entry) if isinstance(entry, int) else entry.min(last)
        return ad.load_index(self.table.at[self.b, entry]).max(0).min(self.pages - 1)

    def box(self, cache, page, first, count: int, head, chunk=None):
        """Head `head` of positions first .. first + count - 1, all on `page` (from `page`), as
        a view of the cache for one TMA copy: every column, or the 64 of `chunk` (64·chunk..)."""
        columns = slice(None) if chunk is None else ad.ds(64 * chunk, 64)
        return cache.at[page, ad.ds(first % self.page_size, count), head, columns]

    def block(self, first, count: int, length, layout=None) -> PagedBlock:
        """Positions first .. first + count - 1, `length` from `length(count, layout)`."""
        return PagedBlock(self, first, count, length, layout)


class PagedBlock:
    """`count` positions of a `PagedSequence` from `first`: `page` (-1 past the table) and
    `present`, whether a key exists there, int32 and bool tiles of `count` in `layout`."""

    def __init__(self, seq: PagedSequence, first, count: int, length, layout=None):
        self.seq, self.count, self.layout = seq, count, layout
        self.positions = first + ad.iota((count,), ad.int32, 0, layout=layout)
        lookup = seq.table.at[seq.b, ad.minimum(self.positions, length - 1) // seq.page_size]
        self.page = ad.load(lookup, layout=layout, mask=self.positions < length, other=-1)
        self.present = (self.page >= 0) & (self.page < seq.pages)

    def rows(self, cache, head, chunk=None):
        """Head `head` of the block's positions in the cache, (count, D) in the cache's dtype, or
        the 64 columns of `chunk` (64·chunk..): zeros where `present` is false."""
        columns = (ad.iota((1, cache.shape[3]), ad.int32, 1) if chunk is None
                   else ad.iota((1, 64), ad.int32, 1) + 64 * chunk)
        where = cache.at[self.page[:, None], (self.positions % self.seq.page_size)[:, None], head, columns]
        return ad.load(where, mask=self.present[:, None], other=0)

    def check(self) -> None:
        """State that the sequence's stored length fits its table and that each of the block's
        positions before it lies on a page inside the cache."""
        seq = self.seq
        stored = seq.stored_length(self.count, self.layout)
        ad.check_all(stored <= seq.capacity, f"a sequence length runs past its block table's {seq.capacity} "
                  "positions (the positions past the table are left out)")
        ad.check_all((self.positions >= stored) | self.present, f"a block table entry names no page of the "
                  f"cache's {seq.pages} (the positions on it are left out)")
