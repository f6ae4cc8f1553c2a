"""Which keys a tile of query rows sees: the layout of q, k, v in global memory, the key blocks a
CTA's query rows walk (causal: up to the diagonal) and the mask of the blocks that need one.

    import asyncdsl as ad
    from asyncdsl.blocks.attention_tiles import QueryTile

    @ad.kernel(grid=lambda mask, S, S_KV, ROWS, BK, CAUSAL: (ad.cdiv(S, ROWS),))
    def visible(mask, S: ad.constexpr, S_KV: ad.constexpr, ROWS: ad.constexpr, BK: ad.constexpr,
                CAUSAL: ad.constexpr):                  # mask: (S, S_KV rounded up to whole blocks)
        tile = QueryTile(S, S_KV, rows=ROWS, BK=BK, causal=CAUSAL)
        for j in ad.range(tile.blocks):              # 0 where a key is visible, -inf where masked
            zero = ad.zeros((ROWS, BK), ad.float32)
            window = mask.at[ad.ds(tile.first_row, ROWS), ad.ds(j * BK, BK)]
            ad.store(window, tile.mask(zero, j, tile.first_row))

A CTA owns `rows` query rows from `first_row` and walks key blocks of BK keys 0, 1, ...,
`blocks` - 1.  Causal, it stops at the block holding its last row's own key, and only the blocks
from `first_masked` on cross the diagonal; the CTAs with the most blocks (the last rows) take
the first program ids, so that the longest run first and the short ones fill the tail.  Not
causal, every CTA walks all keys and only a last block that runs past S_KV (`ragged`) is
masked.  `mask(x, j, row)` hides the scores of block j that a query row from `row` on must not
see, as -inf (whose exponential is 0); the masked keys past the sequence's end are also those
TMA filled with zeros.
"""

from __future__ import annotations

import math

from asyncdsl.dtypes import as_dtype
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad

LAYOUTS = ("BHSD", "BSHD")


def check_operand_types(what: str, lse, **operands) -> None:
    """Refuse, at the call of host function `what`, operands the tensor cores do not take: all
    bfloat16 or all float16, and the log-sum-exp `lse` (None: not an input) float32."""
    types = {name: as_dtype(array.dtype) for name, array in operands.items()}
    first = next(iter(types.values()))
    if first not in (ad.bfloat16, ad.float16) or set(types.values()) != {first} or \
            (lse is not None and as_dtype(lse.dtype) != ad.float32):
        got = ", ".join(f"{name} {dtype}" for name, dtype in types.items())
        if lse is not None:
            got += f", lse {as_dtype(lse.dtype)}"
        raise ad.ArgumentError(f"{what}: {', '.join(types)} must be all bfloat16 or all float16 (the tensor "
                               f"cores' operands){' and lse float32' if lse is not None else ''}, got {got}",
                               user_location())


def head_shapes(q, k, layout: str):
    """(B, H, S, D) of q and (H_kv, S_kv) of k in `layout` ("BHSD", or "BSHD": S before H)."""
    if layout not in LAYOUTS:
        raise ad.TraceError(f"LAYOUT must be one of {LAYOUTS}, got {layout!r}", user_location())
    for name, array in (("q", q), ("k", k)):
        if len(array.shape) != 4:
            raise ad.TraceError(f"{name} must have 4 dims ({', '.join(layout)}), got shape "
                                f"{tuple(array.shape)}", user_location())
    if layout == "BHSD":
        return q.shape, k.shape[1:3]
    (b, s, h, d), (_, s_kv, h_kv, _) = q.shape, k.shape
    return (b, h, s, d), (h_kv, s_kv)


def head_rows(x, layout: str, b, head, start, count):
    """Rows start.. (count of them) of one head of x, (count, D): TMA addresses either layout,
    nothing is transposed."""
    if layout == "BHSD":
        return x.at[b, head, ad.ds(start, count), :]
    return x.at[b, ad.ds(start, count), head, :]


class QueryTile:
    """The key blocks this CTA's `rows` query rows walk; program id 0 numbers the tiles.  S and
    S_KV are Python ints (one length for every head), or traced lengths of the CTA's own
    sequence (a variable-length batch): then the CTAs past the sequence's last tile are not
    `live`, and the blocks that may run past its keys are masked whatever the lengths."""

    def __init__(self, S, S_KV, rows: int, BK: int, causal: bool):
        self.S, self.S_KV, self.BK, self.causal = S, S_KV, BK, causal
        self.static = isinstance(S, int) and isinstance(S_KV, int)
        # Causal with fewer queries than keys: query row i sees keys up to i + S_KV - S (the
        # diagonal aligned to the last key, as a chunk of new tokens sees the cache before it).
        self.offset = S_KV - S if causal else 0
        tiles = ad.cdiv(S, rows) if self.static else (S + rows - 1) // rows
        self.live = None if self.static else ad.program_id(0) < tiles
        # Causal CTAs differ in work (the later rows see more keys): the longest start first.
        self.first_row = ((tiles - 1 - ad.program_id(0)) if causal else ad.program_id(0)) * rows
        key_blocks = ad.cdiv(S_KV, BK) if self.static else (S_KV + BK - 1) // BK
        if causal:
            # The key blocks up to the CTA's last query row; those from `first_masked` on cross
            # the diagonal and are masked (which also masks keys past S for the rows that exist).
            diagonal = self._diagonal(self.first_row)
            self.blocks = ((diagonal + rows + BK - 1) // BK).min(key_blocks)
            self.first_masked = diagonal // BK if self.static else diagonal.max(0) // BK
        else:
            # Only a last block that runs past S_KV is masked.
            self.blocks = key_blocks
            self.ragged = S_KV % BK != 0 if self.static else True
        if not self.static:
            # Block 0 is walked even where no key is visible (S_KV = 0, or causal rows before
            # the first key), all masked: the rows come out empty.
            self.blocks = self.blocks.max(1)

    def _diagonal(self, row):
        """The last key query row `row` sees, causal."""
        return row if isinstance(self.offset, int) and self.offset == 0 else row + self.offset

    def mask(self, x, j, first_row):
        """x, scores of key block j for the query rows from `first_row`, with the keys they must
        not see at -inf: those after the row's own (causal), else those past S_KV."""
        rows, columns = x.shape
        keys = j * self.BK + ad.iota((rows, columns), ad.int32, 1)
        if self.causal:
            hidden = keys > self._diagonal(first_row) + ad.iota((rows, columns), ad.int32, 0)
        else:
            hidden = keys >= self.S_KV
        return ad.where(hidden, -math.inf, x)

    def first_block_masked(self) -> bool:
        """Whether block 0 needs `mask`: causal, where it crosses the first CTAs' diagonal; else
        when it is the only block and runs past S_KV (or may: traced lengths)."""
        return self.causal or not self.static or (self.ragged and self.blocks == 1)

    def walk_after_first(self, step) -> None:
        """step(j, masked) for blocks 1.. in order, `masked` a Python bool: the unmasked run,
        then the blocks that need the mask."""
        if self.causal:
            for j in ad.range(1, self.first_masked):
                step(j, masked=False)
            for j in ad.range(self.first_masked.max(1), self.blocks):
                step(j, masked=True)
        else:
            for j in ad.range(1, self.blocks - int(self.ragged)):
                step(j, masked=False)
            if not self.static:  # the last block, if not the first
                for j in ad.range((self.blocks - 1).max(1), self.blocks):
                    step(j, masked=True)
            elif self.ragged and self.blocks > 1:
                step(self.blocks - 1, masked=True)
