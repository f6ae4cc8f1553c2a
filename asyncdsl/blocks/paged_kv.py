"""Reading a paged KV cache: the keys (or values) of one block of positions of one sequence,
gathered through its block table, as serving engines lay the cache out.

    import asyncdsl as ad
    from asyncdsl.blocks.paged_kv import PagedSequence

    @ad.kernel(grid=lambda cache, table, lens, out, BK: (table.shape[0],))
    def unpaged(cache, table, lens, out, BK: ad.constexpr):  # out[b]: head 0 of sequence b, dense
        seq = PagedSequence(table, lens, ad.program_id(0), cache.shape[0], cache.shape[1])
        for j in range(out.shape[1] // BK):
            ad.store(out.at[ad.program_id(0), ad.ds(j * BK, BK), :], seq.rows(cache, 0, j * BK, BK))

The cache is (pages, page_size, H_kv, D); position t of sequence b lies on page
`table[b, t // page_size]`, row t % page_size.  `rows` gathers a block of BK positions of one
head element by element (the page numbers are data, so no copy engine can take them as
coordinates), reading only positions before the sequence's length, on a page inside the cache:
an entry past the cache or negative, or a length past the table, reads nothing (those rows are
zeros), so a bad table never reads outside the cache.  `visible` says which positions of a block
hold a key that exists: before the length and on a page inside the cache; attention hides the
others.  `check_table` states that a table is good, which the interpreter (and a kernel compiled
with ASYNCDSL_DEBUG=1) reports as an `AssumptionError` where it is not.
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad
from asyncdsl.frontend.assume import check_all


class PagedSequence:
    """Sequence `b` of a batch whose block table is `table` (B, max_pages) int32 and lengths
    `lens` (B,) int32, over a cache of `pages` pages of `page_size` positions."""

    def __init__(self, table, lens, b, pages: int, page_size: int):
        self.table, self.b, self.pages, self.page_size = table, b, pages, page_size
        self.capacity = table.shape[1] * page_size  # positions the table can name
        self.lens = lens

    def check_table(self, first, count: int, layout=None) -> None:
        """State that the sequence's length fits its table and that each of its positions among
        first .. first + count - 1 lies on a page inside the cache."""
        positions = first + ad.iota((count,), ad.int32, 0, layout=layout)
        index = ad.zeros((count,), ad.int32, layout=layout) + self.b
        length = ad.load(self.lens.at[index], layout=layout)
        check_all(length <= self.capacity, f"a sequence length runs past its block table's {self.capacity} "
                  "positions (the positions past the table are left out)")
        page = self.page_of(positions, layout)
        check_all((positions >= length) | ((page >= 0) & (page < self.pages)),
                  f"a block table entry names no page of the cache's {self.pages} (the positions on it are "
                  "left out)")

    def length(self, rows: int, layout=None):
        """The sequence's length as an int32 tile of `rows` equal elements, clamped to what the
        table can name."""
        index = ad.zeros((rows,), ad.int32, layout=layout) + self.b
        return ad.minimum(ad.load(self.lens.at[index], layout=layout), self.capacity)

    def page_of(self, positions, layout=None):
        """The page holding each of `positions` (an int32 tile), -1 past the table."""
        return ad.load(self.table.at[self.b, positions // self.page_size], layout=layout, other=-1)

    def visible(self, first, count: int, layout=None):
        """Whether each of positions first .. first + count - 1 holds a key: before the length,
        on a page inside the cache (a bool tile of `count`)."""
        positions = first + ad.iota((count,), ad.int32, 0, layout=layout)
        page = self.page_of(positions, layout)
        return (positions < self.length(count, layout)) & (page >= 0) & (page < self.pages)

    def rows(self, cache, head, first, count: int):
        """Head `head` of positions first .. first + count - 1 of the cache, (count, D) in the
        cache's dtype: zeros where `visible` is false."""
        positions = first + ad.iota((count,), ad.int32, 0)
        page = self.page_of(positions)
        present = (positions < self.length(count)) & (page >= 0) & (page < self.pages)
        columns = ad.iota((1, cache.shape[3]), ad.int32, 1)
        where = cache.at[page[:, None], (positions % self.page_size)[:, None], head, columns]
        return ad.load(where, mask=present[:, None], other=0)
