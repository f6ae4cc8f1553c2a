"""The random decisions a case is drawn from, and the pieces every scenario draws.

Every decision goes through a `Chooser`: a seeded `random.Random` (the CLI, the CI slice) or
hypothesis (which can then shrink a failing case), so both draw the very same kinds of case.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Protocol, TypeVar

from . import expr
from .cases import Condition, Entry, Rest, Span
from .expr import Binary, Const, CtaId, Hint
from .layout import ELEMENT_TYPES, Tile, Transform, Transpose, Unfit, byte_size, transformed_shape

T = TypeVar("T")


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...  # inclusive bounds

    def choice(self, options: Sequence[T]) -> T: ...

    def chance(self, probability: float) -> bool: ...


class RandomChooser:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options):
        return options[self.rng.randrange(len(options))]

    def chance(self, probability: float) -> bool:
        return self.rng.random() < probability


class HypothesisChooser:
    """The same decisions drawn through hypothesis (which can then shrink them)."""

    def __init__(self, draw):
        from hypothesis import strategies

        self.draw, self.st = draw, strategies

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(self.st.integers(lo, hi))

    def choice(self, options):
        return options[self.draw(self.st.integers(0, len(options) - 1))]

    def chance(self, probability: float) -> bool:
        return self.draw(self.st.integers(0, 999)) < probability * 1000


def weighted(c: Chooser, pairs: Sequence[tuple[T, float]]) -> T:
    scale = 100
    total = sum(round(w * scale) for _, w in pairs)
    pick = c.integer(0, total - 1)
    for value, weight in pairs:
        pick -= round(weight * scale)
        if pick < 0:
            return value
    return pairs[-1][0]


DTYPE_WEIGHTS = (
    ("float32", 6), ("bfloat16", 5), ("float16", 3), ("int8", 3), ("uint8", 2), ("int32", 2),
    ("uint32", 2), ("float64", 2), ("int64", 1), ("uint64", 1), ("int16", 1), ("uint16", 1),
    ("float8_e4m3fn", 1), ("float8_e5m2", 1), ("float8_e8m0fnu", 1),
    ("float4_e2m1fn", 2), ("int4", 1.5), ("uint4", 1.5),
)
GRIDS = (
    ((1, 1, 1), 3), ((2, 1, 1), 4), ((3, 1, 1), 1), ((4, 1, 1), 2), ((1, 2, 1), 2), ((2, 2, 1), 2),
    ((1, 1, 2), 1),
)
MAX_ELEMENTS = 1 << 15


def unit(dtype: str) -> int:
    """Elements in 16 bytes: the granule of TMA minor dims and GMEM strides."""
    return 128 // ELEMENT_TYPES[dtype].bits


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class Draw:
    """The state of drawing one case."""

    def __init__(self, c: Chooser, hints: bool):
        self.c = c
        self.hints = hints
        self.grid = (1, 1, 1)
        self.cluster = (1, 1, 1)
        self.uniform_ids: list[CtaId] = []  # ids a collective group agrees on

    # -- index expressions ---------------------------------------------------------------------

    def cta_id(self) -> CtaId:
        if self.uniform_ids:  # a collective load: its whole group must agree on the window
            return self.c.choice(self.uniform_ids)
        axes = [a for a in range(3) if self.grid[a] > 1] or [0]
        return CtaId("program_id", self.c.choice(axes))

    def traced_start(self, size: int, align: int) -> expr.Expr:
        c = self.c
        step = c.choice([size, size, align, 2 * align, 1, align + 1])
        offset = weighted(c, [(0, 4), (align, 2), (-align, 1), (c.integer(-3, 3), 2), (size, 1)])
        base = self.cta_id()
        value: expr.Expr = Binary("*", base, Const(step)) if step != 1 else base
        if offset:
            value = Binary("+", value, Const(offset)) if offset > 0 else Binary("-", value, Const(-offset))
        if c.chance(0.06):
            return Binary("+", Binary("*", base, Const(0)), Const(offset))  # folds to a literal
        if self.hints and align > 1 and c.chance(0.2):
            return Hint(value, align)
        return value

    def squeeze_index(self, size: int) -> expr.Expr:
        c = self.c
        kind = weighted(c, [("literal", 5), ("out-of-range", 0.2), ("traced", 4), ("folded", 1)])
        if kind == "literal":
            return Const(c.integer(-size, size - 1))
        if kind == "out-of-range":
            return Const(c.choice([size, -size - 1]))
        base = self.cta_id()
        if kind == "folded":
            return Binary("-", Binary("*", base, Const(0)), Const(c.integer(1, size)))
        offset = c.choice([0, 0, 1, -1, size - 1, size])
        step = c.choice([1, 1, 1, 2, size])
        value: expr.Expr = base if step == 1 else Binary("*", base, Const(step))
        if offset:
            value = Binary("+", value, Const(offset)) if offset > 0 else Binary("-", value, Const(-offset))
        return value

    def condition(self) -> Condition:
        c = self.c
        lhs = self.cta_id()
        return weighted(c, [
            (Condition(Binary("%", lhs, Const(2)), "==", c.integer(0, 1)), 3),
            (Condition(lhs, "<", c.integer(1, 2)), 2),
            (Condition(lhs, ">=", 1), 1),
            (Condition(lhs, "!=", 0), 1),
        ])

    # -- shapes --------------------------------------------------------------------------------

    def gmem_shape(self, dtype: str, rank: int) -> tuple[int, ...]:
        c = self.c
        granule = unit(dtype)
        last = granule * c.choice([1, 1, 2, 2, 4, 8])
        if c.chance(0.04):
            last += c.integer(1, max(1, granule - 1))  # GMEM strides of no whole 16 bytes
        shape = [last]
        for _ in range(rank - 1):
            options = [1, 1, 2, 3, 4, 5, 8, 16, 24, 32, 64] if rank <= 3 else [1, 1, 2, 3, 4, 8]
            size = c.choice(options)
            while size > 1 and math.prod(shape) * size > MAX_ELEMENTS:
                size //= 2
            shape.insert(0, size)
        return tuple(shape)

    def window_size(self, size: int, minor: bool, dtype: str) -> int:
        c = self.c
        if minor:
            granule = unit(dtype)
            window = granule * c.choice([1, 1, 2, 2, 4])
            if c.chance(0.05):
                window += c.integer(1, max(1, granule - 1))
            if c.chance(0.02):
                window = 512  # a box over 256 elements
            return window
        options = [s for s in (1, 2, 3, 4, 8, 16, 32, 64) if s <= size] or [1]
        window = c.choice(options)
        if c.chance(0.1):
            window = c.choice([size + 1, 2 * size, 8, 16])
        if c.chance(0.015):
            window = 300
        return max(1, window)

    def span(self, size: int) -> Span:
        c = self.c
        lo = c.choice([None, 0, c.integer(-size, size), 1])
        hi = c.choice([None, size, c.integer(-size, size + 2)])
        return Span(lo, hi)

    # -- transforms ----------------------------------------------------------------------------

    def permutation(self, rank: int) -> tuple[int, ...]:
        c = self.c
        order = list(range(rank - 1))
        for i in range(len(order) - 1, 0, -1):
            j = c.integer(0, i)
            order[i], order[j] = order[j], order[i]
        permutation = [*order, rank - 1]
        if rank > 1 and c.chance(0.08):
            i = c.integer(0, rank - 2)
            permutation[i], permutation[-1] = permutation[-1], permutation[i]  # moves the minor dim
        return tuple(permutation)

    def tile(self, shape: Sequence[int], dtype: str, gmem_sizes: Sequence[int | None]) -> Tile:
        c = self.c
        rank = c.choice([1, 2]) if len(shape) >= 2 else 1
        if c.chance(0.02):
            rank = len(shape) + 1  # more tiled dims than the window has
        tiling, round_down = [], False
        for position in range(max(0, len(shape) - rank), len(shape)):
            size = shape[position]
            options = divisors(size)
            if position == len(shape) - 1:
                granule = unit(dtype)
                options = [d for d in options if d % granule == 0] or options
            elif len(options) > 2:
                options = options[1:]
            tile = c.choice(options)
            if c.chance(0.04):
                tile = size + c.integer(1, 3)  # does not divide the window
            tiling.append(tile)
            gmem = gmem_sizes[position] if position < len(gmem_sizes) else None
            if gmem is not None and gmem > tile and gmem % tile and c.chance(0.8):
                round_down = True
        if len(tiling) < rank:
            tiling = [1] * (rank - len(tiling)) + tiling
        if not round_down and c.chance(0.04):
            round_down = True
        return Tile(tuple(tiling), round_down)

    def transforms(
        self, window: Sequence[int], dtype: str, gmem_sizes: Sequence[int | None]
    ) -> tuple[Transform, ...]:
        c = self.c
        kind = weighted(c, [
            ("none", 5), ("tile", 4), ("transpose", 1.5), ("transpose-tile", 1.5), ("tile-transpose", 1.5),
        ])
        shape, sizes = list(window), list(gmem_sizes)
        chain: list[Transform] = []
        if kind.startswith("transpose") and len(shape) >= 2:
            permutation = self.permutation(len(shape))
            chain.append(Transpose(permutation))
            shape = [shape[p] for p in permutation]
            sizes = [sizes[p] for p in permutation]
        if "tile" in kind:
            chain.append(self.tile(shape, dtype, sizes))
        if kind == "tile-transpose":
            try:
                rank = len(transformed_shape(chain, window))
            except Unfit:
                rank = 0
            if rank >= 2:
                chain.append(Transpose(self.permutation(rank)))
        return tuple(chain)

    def swizzle(self, smem_shape: Sequence[int], dtype: str) -> int | None:
        c = self.c
        inner = byte_size(smem_shape[-1:], ELEMENT_TYPES[dtype]) if smem_shape else 0
        if inner in (32, 64, 128) and c.chance(0.5):
            return inner
        if c.chance(0.04):
            return c.choice([32, 64, 128])
        if c.chance(0.02):
            return c.choice([0, 16])
        if c.chance(0.01):
            return 48
        return None


def smem_shape_for(c: Chooser, chain, window: Sequence[int]) -> tuple[int, ...]:
    try:
        shape = transformed_shape(chain, window)
    except Unfit:
        shape = tuple(window)
    if c.chance(0.03) and shape:
        wrong = list(shape)
        position = c.integer(0, len(wrong) - 1)
        wrong[position] = c.choice([wrong[position] * 2, wrong[position] + 1, max(1, wrong[position] // 2)])
        shape = tuple(wrong)
    return shape or (1,)


def hide_full_dims(c: Chooser, key: list[Entry]) -> list[Entry]:
    """Write some `:` entries as `...` or leave trailing ones out, as users do."""
    if c.chance(0.25):
        runs = [i for i in range(len(key) + 1)]
        start = c.choice(runs)
        end = start
        while end < len(key) and key[end] == Span():
            end += 1
        return key[:start] + [Rest()] + key[end:]
    if c.chance(0.1):
        while len(key) > 1 and key[-1] == Span():
            key = key[:-1]
    return key


