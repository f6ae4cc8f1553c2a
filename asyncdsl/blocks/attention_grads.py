"""Which query blocks a key block of attention's backward pass walks, and how its share of dq
reaches the float32 sum: a CTA holds BN keys and values and streams the query blocks that see
them, for every query head of its key/value head's group (grouped-query attention).

    x, head = grid_position(DETERMINISTIC)
    tile = KeyTile(S, S_KV, BN, BM, causal, group, h_kv, DETERMINISTIC, x)
    tile.walk(lambda t, h, i, masked: ...)     # step t: query head h, query block i

Not causal, every key block meets every query block.  Causal, key block j meets the query
blocks from the one holding its first key's own query (`first`); the first BN / BM of them cross
the diagonal and are masked.  Key block j is the CTA's `x` (`grid_position`: its place in the
launch order among its head's key blocks) counted from the left: causal, the longest walks
start first; in deterministic mode from the right, so that the key blocks add into each query
block's dq right to left, each waiting only for blocks that started before it (a CTA never
waits for one not yet running).

S and S_KV may be traced, the lengths of a packed batch's sequence (`asyncdsl.kernels.
attention_varlen_backward`): then the CTAs past the sequence's key blocks are not `live`, the
causal diagonal is aligned to the last key, and the steps that may see keys past the sequence's
are masked too (not causal: every step of a CTA whose keys run past them); the query rows past
the sequence are hidden by their log-sum-exp (`row_lse`).

A share of dq (64 query rows, float32, in 64-column pieces) goes into the float32 workspace by
TMA reduce-add: `DqAdder` hands the consumers' pieces through SMEM to the producer warpgroup,
which adds them.  Deterministic, the adds into one query block of one head go in a fixed order:
a flag per (batch, head, query block), reset to 0 before the launch, counts the key blocks
whose adds are done; the producer waits until it counts those before its own
(`KeyTile.order`), adds, waits for its writes to complete, then counts its own.
"""

from __future__ import annotations

from asyncdsl.blocks.attention_tiles import head_shapes
from asyncdsl.blocks.mma_operands import tensor_core_layout
from asyncdsl.blocks.shapes import check_causal_lengths, check_head_groups
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad


def head_window(x, layout: str, b, head, start, count, column: int, width: int):
    """Rows start.. (count of them), columns column.. (width of them) of one head of x."""
    if layout == "BHSD":
        return x.at[b, head, ad.ds(start, count), ad.ds(column, width)]
    return x.at[b, ad.ds(start, count), head, ad.ds(column, width)]


# Key blocks of one (batch, head) that start side by side in deterministic mode (`grid_position`)
ORDERED_CHUNK = 8


def grid_position(ordered: bool) -> tuple:
    """(x, head) of this CTA: its key block counted in launch order (`KeyTile` counts it from
    the left, or in deterministic mode from the right) and its (batch, key/value head), from a
    grid of (key blocks, batch × heads).  Unordered, they are program ids 0 and 1: a head's
    key blocks run side by side and share its q and do in L2.  Ordered, `ordered_position`."""
    if not ordered:
        return ad.program_id(0), ad.program_id(1)
    blocks, heads = ad.num_programs(0), ad.num_programs(1)
    return ordered_position(ad.program_id(0) + blocks * ad.program_id(1), blocks, heads)


def ordered_position(launched, blocks, heads) -> tuple:
    """(x, head) of the CTA launched `launched`-th of a grid of `blocks` key blocks by `heads`
    in deterministic mode (ints or traced scalars).  There the adds into a query block's dq wait
    for each other along the head's key blocks, a microsecond or so each (the reduce-add landing,
    the count seen), so a head whose key blocks all start at once ends that many microseconds
    after its first: the CTAs start `ORDERED_CHUNK` key blocks of every head, then the next such
    chunk of every head, and so on.  The waits in a row are then those of the chunks of a head
    running at once: one or two where a chunk of every head fills the GPU (B · H_kv · 8 CTAs
    or more), more with fewer heads, the whole row with one.  A key block still starts after
    every block it waits for: those to its right, in the chunks before or earlier in its own."""
    chunk = launched // (ORDERED_CHUNK * heads)  # the chunks before the last are whole
    within = launched - chunk * ORDERED_CHUNK * heads
    left = blocks - chunk * ORDERED_CHUNK
    width = min(left, ORDERED_CHUNK) if isinstance(left, int) else left.min(ORDERED_CHUNK)
    return chunk * ORDERED_CHUNK + within % width, within // width


class KeyTile:
    """The query blocks (of BM rows) the CTA's BN keys meet, over the `group` query heads of
    key/value head `h_kv`, the CTA's key block `x` counted as `grid_position` gives it."""

    def __init__(self, S, S_KV, BN: int, BM: int, causal: bool, group: int, h_kv, ordered: bool, x):
        self.BN, self.BM, self.causal, self.group, self.h_kv = BN, BM, causal, group, h_kv
        self.S, self.S_KV = S, S_KV
        self.static = isinstance(S, int) and isinstance(S_KV, int)
        # Traced and causal, query row i sees keys up to i + S_KV - S (the diagonal aligned to
        # the last key, as the variable-length forward's).
        self.offset = S_KV - S if causal and not self.static else 0
        self.key_blocks = ad.cdiv(S_KV, BN) if self.static else (S_KV + BN - 1) // BN
        self.query_blocks = ad.cdiv(S, BM) if self.static else (S + BM - 1) // BM
        self.live = None if self.static else x < self.key_blocks
        self.j = (self.key_blocks - 1 - x) if ordered else x
        self.first_key = self.j * BN
        self.first = 0
        if causal and self.static:  # BN is a multiple of BM; the first BN / BM blocks cross the diagonal
            first = self.first_key // BM
            self.diagonal = (first + BN // BM).min(self.query_blocks)
            self.first = first
        elif causal:  # the first query block with a row that sees the block's first key
            self.first = (self.first_key - self.offset).max(0) // BM
            # From the first query block whose rows all see the block's last key on, no step
            # needs the mask (nor do those rows see a key past the sequence's).
            last_key = (self.first_key + BN - 1 - self.offset).max(0)
            self.diagonal = ((last_key + BM - 1) // BM).max(self.first).min(self.query_blocks)
        self.per_head = self.query_blocks - self.first
        self.steps = group * self.per_head

    def walk(self, step) -> None:
        """step(t, h, i, masked) for each query head h of the group and each query block i it
        meets, t counting the steps from 0; `masked` a Python bool."""
        for g in ad.range(self.group):
            h = self.h_kv * self.group + g
            base = g * self.per_head - self.first
            if not self.static and not self.causal:  # masked if the CTA's keys run past the sequence's
                with ad.when(self.first_key + self.BN <= self.S_KV):
                    for i in ad.range(self.query_blocks):
                        step(base + i, h, i, masked=False)
                with ad.when(self.first_key + self.BN > self.S_KV):
                    for i in ad.range(self.query_blocks):
                        step(base + i, h, i, masked=True)
            elif self.causal:
                for i in ad.range(self.first, self.diagonal):
                    step(base + i, h, i, masked=True)
                for i in ad.range(self.diagonal, self.query_blocks):
                    step(base + i, h, i, masked=False)
            else:
                for i in ad.range(self.query_blocks):
                    step(base + i, h, i, masked=False)

    def walk_trailing(self, step, behind, lag: int) -> None:
        """`walk(step)`, each step t followed by behind(t - lag), and the last `lag` steps'
        behind() after the walk: for a producer that works on what the consumers finished
        `lag` steps earlier."""
        def ahead_then_behind(t, h, i, masked: bool):
            step(t, h, i, masked)
            with ad.when(t >= lag):
                behind(t - lag)

        self.walk(ahead_then_behind)
        for back in range(lag, 0, -1):
            if isinstance(self.steps, int):  # a static walk: no step -1 is traced
                if self.steps >= back:
                    behind(self.steps - back)
            else:
                with ad.when(self.steps >= back):
                    behind(self.steps - back)

    def locate(self, t):
        """(query head, query block) of step t of `walk`."""
        g = t // self.per_head if self.group > 1 else 0
        i = self.first + (t % self.per_head if self.group > 1 else t)
        return self.h_kv * self.group + g, i

    def mask(self, s_t, first_key, i, hidden: float = -float("inf")):
        """The scores s_t (keys × queries, keys from `first_key`, query block i) with the keys
        after each query's own at `hidden` (-inf for scores, 0 for probabilities); traced
        lengths, also the keys past the sequence's (its neighbours' rows)."""
        if self.causal and not self.static:  # keys > queries + offset: the keys counted from the offset
            first_key = first_key - self.offset
        keys = first_key + ad.iota(s_t.shape, ad.int32, 0)
        queries = i * self.BM + ad.iota(s_t.shape, ad.int32, 1)
        if self.static or self.causal:
            return ad.where(keys > queries, hidden, s_t)
        # Query rows past the sequence's are hidden by their log-sum-exp (`row_lse`).
        return ad.where(keys >= self.S_KV, hidden, s_t)

    def row_lse(self, lse, i, layout=ad.WGMMA_COL):
        """The log-sum-exp of query block i's rows (`lse` their GMEM window) as the exponentials
        take it, in `layout`.  Traced lengths: a row past the sequence's gets +inf, so that all
        its probabilities are 0.  (A row that sees no key has lse = -inf and infinite
        probabilities, all of them masked to 0 after the exponentials.)"""
        if self.static:
            return ad.load(lse, layout=layout)
        rows = ad.iota((self.BM,), ad.int32, 0, layout=layout) < self.S - i * self.BM
        return ad.load(lse, layout=layout, mask=rows, other=float("inf"))

    def order(self, i):
        """How many key blocks add into query block i's dq before this one (deterministic
        mode): the key blocks that meet it, right to left."""
        last = self.key_blocks - 1
        if self.causal and self.static:
            last = (((i + 1) * self.BM - 1) // self.BN).min(last)
        elif self.causal:  # key block 0 meets every query block
            last = (((i + 1) * self.BM - 1 + self.offset).max(0) // self.BN).min(last)
        return last - self.j


class DqAdder:
    """dq pieces (64 query rows × 64 columns, float32) handed over by the consumers through two
    SMEM slots to the producer warpgroup, which adds them into the workspace by TMA reduce-add,
    in deterministic mode in order: the waits for the adds before a CTA's, and for its own to
    land, are then not on the consumers' path.  A slot's k-th piece (`writes` = k) waits until
    the producer's add has read the (k-1)-th out of it."""

    def __init__(self):
        self.slot = ad.smem((2, 64, 64), ad.float32, **tensor_core_layout(64, 32))
        self.ready = ad.barrier(num=2)  # [slot] a piece is in it
        self.read = ad.barrier(num=2)  # [slot] the producer's add has read it

    def hand(self, slot, writes, piece) -> None:
        """For a consumer: put the `writes`-th piece of `slot` (registers, retired) into it."""
        with ad.when(writes >= 1):
            self.read[slot].wait(parity=(writes - 1) % 2)
        self.slot.at[slot][...] = piece[...]
        ad.fence_async_smem()  # (the warpgroup meets) the copy engine reads what the threads wrote
        self.ready[slot].arrive(sync=False)

    def add(self, rounds, flag=None, after=None) -> None:
        """For the producer: add the pieces of `rounds`, lists of (slot, writes, workspace
        window) in different slots, a round once its pieces are in; with a `flag`, in order:
        wait until it counts `after` adds, add, wait for the writes to land, count one more."""
        if flag is not None:
            ad.wait_signal(flag, "ge", after)
        for pieces in rounds:
            for slot, writes, _ in pieces:
                self.ready[slot].wait(parity=writes % 2)
            for slot, _, window in pieces:
                ad.async_copy(self.slot.at[slot], window, reduction="add")
            ad.await_async_copy(0, read_only=True)
            for slot, _, _ in pieces:
                self.read[slot].arrive()
        if flag is not None:
            ad.await_async_copy(0)  # the adds' writes are complete before the next may start
            ad.signal(flag, 1, op="add")


def check_gradients(q, k, v, do, lse, delta, workspace, dk, dv, flags, BM: int, dims, causal: bool,
                    layout: str) -> None:
    """Refuse at trace time what a backward kernel taking head dims `dims` does not compute."""
    (B, H, S, D), (H_KV, S_KV) = head_shapes(q, k, layout)
    expected = {"v": k.shape, "do": q.shape, "dk": k.shape, "dv": k.shape, "lse": (B, H, S),
                "delta": (B, H, S), "workspace": (B, H, S, D), "flags": (B, H, -(-S // BM))}
    arrays = {"v": v, "do": do, "dk": dk, "dv": dv, "lse": lse, "delta": delta, "workspace": workspace,
              "flags": flags}
    for name, array in arrays.items():
        if tuple(array.shape) != expected[name]:
            raise ad.TraceError(f"{name} has shape {tuple(array.shape)}, expected {expected[name]} "
                                f"({layout} layout)", user_location())
    if D not in dims:
        raise ad.TraceError(f"head dim {D}: this backward kernel takes {' or '.join(map(str, dims))}",
                            user_location())
    check_head_groups(H, H_KV)
    if causal:
        check_causal_lengths(S, S_KV)
