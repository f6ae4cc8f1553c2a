"""Drawing cases: one generator, fed by a seeded `random.Random` (the CLI) or by hypothesis.

Every random decision goes through a `Chooser`, so `python -m tests.fuzz --seed S` draws the
same cases on every machine (case i of seed S comes from `random.Random(f"{S}:{i}")`) and the
pytest strategy (`cases()`) lets hypothesis draw and shrink the very same decisions.

The mix aims at both kinds of outcome: most cases follow the documented rules (so they must
compile, assemble and match the model), and a steady fraction breaks one rule on purpose (a
box over 256, a misaligned start, a wrong buffer shape, a bad swizzle, a reduction the table
refuses, ...) and must end in a clean error.  Shapes stay small so that interpreting is fast.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from . import expr
from .cases import REDUCTIONS, Case, Condition, Entry, Rest, Span, Squeeze, Window
from .expr import Binary, Const, CtaId, Hint
from .layout import ELEMENT_TYPES, Tile, Transform, Transpose, Unfit, byte_size, tiled_dims, transformed_shape
from .semantics import ALLOWED_REDUCTIONS

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
GRIDS = (((1, 1, 1), 3), ((2, 1, 1), 4), ((3, 1, 1), 1), ((4, 1, 1), 2), ((1, 2, 1), 2), ((2, 2, 1), 2), ((1, 1, 2), 1))
MAX_ELEMENTS = 1 << 15


def unit(dtype: str) -> int:
    """Elements in 16 bytes: the granule of TMA minor dims and GMEM strides."""
    return 128 // ELEMENT_TYPES[dtype].bits


def _divisors(n: int) -> list[int]:
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
            options = _divisors(size)
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

    def transforms(self, window: Sequence[int], dtype: str, gmem_sizes: Sequence[int | None]) -> tuple[Transform, ...]:
        c = self.c
        kind = weighted(c, [("none", 5), ("tile", 4), ("transpose", 1.5), ("transpose-tile", 1.5), ("tile-transpose", 1.5)])
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


def _alignment(chain: Sequence[Transform], window_dims: Sequence[int]) -> dict[int, int]:
    """The tile each GMEM dim's window start must be a multiple of."""
    return {dim: tile for dim, tile, _ in tiled_dims(chain, window_dims)}


def _smem_shape(c: Chooser, chain, window: Sequence[int]) -> tuple[int, ...]:
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


def _hide_full_dims(c: Chooser, key: list[Entry]) -> list[Entry]:
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


def _tensor_window(d: Draw, dtype: str, shape: tuple[int, ...], direction: str):
    """(key, transforms, smem shape, swizzle) of a TMA-style window of `shape`."""
    c = d.c
    rank = len(shape)
    plan = []  # per dim: ("squeeze",) | ("window", size) | ("span", Span) | ("full",)
    for dim, size in enumerate(shape):
        minor = dim == rank - 1
        weights = [("squeeze", 0.3), ("window", 6), ("full", 3), ("span", 1)] if minor else [
            ("squeeze", 3), ("window", 4), ("full", 2), ("span", 1)]
        kind = weighted(c, weights)
        if kind == "window":
            plan.append(("window", d.window_size(size, minor, dtype)))
        elif kind == "span":
            plan.append(("span", d.span(size)))
        else:
            plan.append((kind,))
    window_dims, window = [], []
    for dim, (item, size) in enumerate(zip(plan, shape)):
        if item[0] == "window":
            window_dims.append(dim)
            window.append(item[1])
        elif item[0] == "full":
            window_dims.append(dim)
            window.append(size)
        elif item[0] == "span":
            lo, hi, _ = slice(item[1].lo, item[1].hi).indices(size)
            window_dims.append(dim)
            window.append(max(1, hi - lo))
    chain = d.transforms(window, dtype, [shape[g] for g in window_dims]) if window else ()
    aligned = _alignment(chain, window_dims)
    packed = ELEMENT_TYPES[dtype].packed
    key: list[Entry] = []
    for dim, (item, size) in enumerate(zip(plan, shape)):
        if item[0] == "squeeze":
            key.append(Squeeze(d.squeeze_index(size)))
        elif item[0] == "full":
            key.append(Span())
        elif item[0] == "span":
            key.append(item[1])
        else:
            align = aligned.get(dim, 1)
            if packed and dim == rank - 1:
                align = math.lcm(align, 2)
            key.append(Window(start_for(d, size, item[1], align, direction), item[1]))
    smem_shape = _smem_shape(c, chain, window)
    return _hide_full_dims(c, key), chain, smem_shape, d.swizzle(smem_shape, dtype)


def start_for(d: Draw, size: int, window: int, align: int, direction: str) -> expr.Expr:
    c = d.c
    kind = weighted(c, [("inside", 5), ("edge", 2), ("traced", 4)])
    if kind == "inside":
        top = max(0, size - window) // align
        return Const(c.integer(0, top) * align)
    if kind == "edge":
        start = c.integer(-window, size + window)
        if c.chance(0.7):
            start -= start % align
        if direction == "store" and c.chance(0.3):
            start = -c.choice([align, window])  # a literal negative store start
        return Const(start)
    return d.traced_start(window, align)


def _dtype(c: Chooser) -> str:
    return weighted(c, DTYPE_WEIGHTS)


def _features(d: Draw, case_kwargs: dict, direction: str) -> dict:
    """Predicates, buffer slots and arrive=False, drawn for any scenario."""
    c = d.c
    if c.chance(0.12):
        case_kwargs["predicate"] = d.condition()
    if c.chance(0.08):
        slots = c.integer(2, 3)
        case_kwargs["slots"] = slots
        if c.chance(0.3):
            case_kwargs["slot"] = Binary("%", d.cta_id(), Const(slots))
        else:
            case_kwargs["slot"] = Const(c.integer(0, slots - 1) if c.chance(0.95) else slots)
    if direction == "load" and c.chance(0.1):
        case_kwargs["arrive"] = False
    return case_kwargs


def _tma_case(d: Draw, name: str, direction: str, reduction: str | None = None) -> Case:
    c = d.c
    dtype = _dtype(c)
    if reduction and c.chance(0.85):
        dtype = c.choice(ALLOWED_REDUCTIONS[reduction])
    d.grid = weighted(c, GRIDS)
    rank = weighted(c, [(1, 2), (2, 5), (3, 3), (4, 2), (5, 1.5)])
    shape = d.gmem_shape(dtype, rank)
    whole = c.chance(0.04)
    key, chain, smem_shape, swizzle = _tensor_window(d, dtype, shape, direction)
    if whole:
        key, chain = None, ()
        smem_shape, swizzle = shape, None
    kwargs = dict(transforms=chain, swizzle=swizzle, grid=d.grid, reduction=reduction)
    if c.chance(0.06):
        kwargs["oob"] = c.choice(["undefined", "promise_in_bounds"])
    return Case(name, direction, dtype, shape, None if key is None else tuple(key), smem_shape,
                **_features(d, kwargs, direction))


def _bulk_case(d: Draw, name: str) -> Case:
    """A window that is one contiguous run of the array (leading indices, one window, whole
    trailing dims), moved with oob="undefined" or "promise_in_bounds": a plain bulk copy of any
    length.  Some windows are not runs, and take the TMA path."""
    c = d.c
    dtype = weighted(c, DTYPE_WEIGHTS[:15] + (("int4", 0.3),))
    direction = "store" if c.chance(0.35) else "load"
    d.grid = weighted(c, GRIDS)
    if c.chance(0.2):
        case = _tma_case(d, name, direction)
        return replace(case, oob=c.choice(["undefined", "promise_in_bounds"]))
    rank = weighted(c, [(1, 3), (2, 4), (3, 2), (4, 1)])
    item = ELEMENT_TYPES[dtype].numpy.itemsize
    granule = max(1, 16 // item)
    last = granule * c.choice([1, 2, 4, 8, 16, 64])
    if c.chance(0.08):
        last += c.integer(1, 3)  # rows of no whole 16 bytes
    shape = [c.choice([1, 2, 3, 4, 8, 16, 32]) for _ in range(rank - 1)] + [last]
    while math.prod(shape) > MAX_ELEMENTS and max(shape[:-1], default=1) > 1:
        largest = shape.index(max(shape[:-1]))
        shape[largest] //= 2
    squeezed = c.integer(0, rank - 1)
    key: list[Entry] = [Squeeze(d.squeeze_index(shape[k]) if c.chance(0.3) else Const(c.integer(0, shape[k] - 1)))
                        for k in range(squeezed)]
    lead, trailing = shape[squeezed], shape[squeezed + 1:]
    if not trailing:  # the window is along the minor dim: whole 16-byte units, mostly
        size = granule * c.choice([1, 2, 4, 8, 16, 64]) + (c.integer(1, 3) if c.chance(0.08) else 0)
    else:
        size = c.choice([1, 2, 4, 8, 16, 64])
    row_bytes = math.prod(trailing) * item
    size = max(1, min(size, 48 * 1024 // row_bytes))
    kind = weighted(c, [("inside", 5), ("past-end", 2), ("negative", 1), ("traced", 3)])
    if kind == "inside":
        start: expr.Expr = Const(c.integer(0, max(0, lead - size)))
    elif kind == "past-end":
        start = Const(c.integer(max(0, lead - size + 1), lead + 2))
    elif kind == "negative":
        start = Const(-c.integer(1, size))
    else:
        start = d.traced_start(size, granule if not trailing else 1)
    key.append(Window(start, size))
    key += [Span()] * len(trailing)
    window = [size, *trailing]
    chain: tuple[Transform, ...] = ()
    if len(trailing) == 1 and c.chance(0.3):
        chain = (Tile((c.choice(_divisors(size)), trailing[0])),)
    kwargs = dict(transforms=chain, grid=d.grid, oob=c.choice(["undefined", "undefined", "promise_in_bounds"]))
    return Case(name, direction, dtype, tuple(shape), tuple(_hide_full_dims(c, key)), _smem_shape(c, chain, window),
                **_features(d, kwargs, direction))


def _cp_async_case(d: Draw, name: str) -> Case:
    c = d.c
    dtype = weighted(c, DTYPE_WEIGHTS[:15] + (("uint4", 0.3),))
    item = ELEMENT_TYPES[dtype].numpy.itemsize
    d.grid = weighted(c, GRIDS)
    rows_total = c.choice([8, 16, 32, 64])
    cols_total = c.choice([16, 32, 64, 128, 256]) // item + (c.choice([0, 0, 1, 2]) if item < 4 else 0)
    shape: tuple[int, ...] = (rows_total, cols_total)
    key: list[Entry] = []
    if c.chance(0.2):
        shape = (c.choice([2, 3]), *shape)
        key.append(Squeeze(Const(c.integer(0, shape[0] - 1)) if c.chance(0.7) else d.squeeze_index(shape[0])))
    rows = c.choice([1, 2, 4, 8, 16])
    swizzle = None
    chain: tuple[Transform, ...] = ()
    style = weighted(c, [("plain", 5), ("tiled", 3), ("swizzled", 2)])
    if style == "plain":
        cols = c.choice([4, 8, 16, 32, 64]) // item if item <= 4 else c.choice([1, 2, 4])
        cols = max(1, min(cols, cols_total))
    else:
        width = c.choice([16, 32, 64, 128]) if style == "tiled" else c.choice([32, 64, 128])
        tile_cols = max(1, width // item)
        cols = tile_cols * c.choice([1, 2]) if style == "tiled" else tile_cols
        if style == "tiled":
            chain = (Tile((c.choice([r for r in (1, 2, 4, 8) if rows % r == 0]), tile_cols)),)
        if style == "swizzled" or c.chance(0.3):
            swizzle = tile_cols * item
            if style == "swizzled" and c.chance(0.5):
                chain = (Tile((c.choice([r for r in (1, 2, 4, 8) if rows % r == 0]), tile_cols)),)
    rows_total = max(rows_total, 4 * rows)
    shape = (*shape[:-2], rows_total, shape[-1])
    row_start: expr.Expr = Const(c.integer(0, rows_total - rows))
    if c.chance(0.4):
        row_start = Binary("*", d.cta_id(), Const(rows)) if c.chance(0.85) else d.traced_start(rows, 1)
    col_start = Const(c.integer(0, max(0, cols_total - cols)) if c.chance(0.8) else 0)
    if c.chance(0.05):
        col_start = Const(cols_total - cols + c.integer(1, 4))  # past the end
    key += [Window(row_start, rows), Window(col_start, cols)]
    smem_shape = _smem_shape(c, chain, (rows, cols))
    kwargs = dict(transforms=chain, swizzle=swizzle, grid=d.grid, implementation="cp_async",
                  barrier=c.chance(0.6))
    if c.chance(0.03):
        kwargs["predicate"] = d.condition()
    if c.chance(0.03):
        kwargs["oob"] = "undefined"
    return Case(name, "load", dtype, shape, tuple(key), smem_shape, **kwargs)


CLUSTERS = (((2, 1, 1), 4), ((4, 1, 1), 2), ((1, 2, 1), 2), ((2, 2, 1), 2))


def _collective_case(d: Draw, name: str, partition: bool = False) -> Case:
    c = d.c
    d.cluster = weighted(c, CLUSTERS) if not partition else (2, 1, 1)
    dims = [a for a in "xyz" if d.cluster["xyz".index(a)] > 1]
    collective = tuple(c.choice([dims, dims[:1], dims[-1:]])) if not partition else ("x",)
    if c.chance(0.1):
        collective += ("z",)  # a dim of one CTA shares nothing and drops out
    group = math.prod(d.cluster["xyz".index(a)] for a in set(collective))
    d.grid = (d.cluster[0] * c.choice([1, 1, 2]), d.cluster[1], d.cluster[2])
    d.uniform_ids = [CtaId("cluster_id", a) for a in range(3) if d.grid[a] > d.cluster[a]]
    d.uniform_ids += [CtaId("cluster_cta_id", "xyz".index(a)) for a in dims if a not in collective]
    d.uniform_ids = d.uniform_ids or [CtaId("cluster_id", 0)]
    dtype = weighted(c, DTYPE_WEIGHTS) if c.chance(0.75) else c.choice(["float4_e2m1fn", "int4", "uint4"])
    rows_total = c.choice([16, 32, 64])
    inner = unit(dtype) * c.choice([1, 2, 4, 4, 8])
    shape = (rows_total, inner) if c.chance(0.7) else (c.choice([2, 3]), rows_total, inner)
    tile_rows = c.choice([1, 2, 4, 8, 8])
    rows = group * tile_rows * c.choice([1, 2])
    if c.chance(0.1):
        rows += 1  # nothing to split evenly
    chain: tuple[Transform, ...] = ()
    if c.chance(0.35) and rows % tile_rows == 0:
        chain = (Tile((tile_rows, inner)),)
    cols = inner if chain or c.chance(0.5) else max(unit(dtype), inner // 2)
    row_start: expr.Expr = Const(c.integer(0, rows_total // tile_rows) * tile_rows)
    if c.chance(0.5):
        row_start = Binary("*", c.choice(d.uniform_ids), Const(rows if not chain else tile_rows * c.choice([1, 2])))
    key: list[Entry] = [Window(row_start, rows), Window(Const(0), cols)]
    if len(shape) == 3:
        key.insert(0, Squeeze(Const(c.integer(0, shape[0] - 1)) if c.chance(0.5) else c.choice(d.uniform_ids)))
    smem_shape = _smem_shape(c, chain, (rows, cols))
    kwargs = dict(transforms=chain, swizzle=d.swizzle(smem_shape, dtype), grid=d.grid, cluster=d.cluster,
                  collective=collective)
    if partition:
        kwargs["partition"] = c.choice(["replicated", "partitioned"])
        kwargs["arch"] = c.choice(["sm_90a", "sm_100a"])
        kwargs["compile_only"] = kwargs["arch"] == "sm_100a"
        return Case(name, "load", dtype, shape, tuple(key), smem_shape, **kwargs)
    if c.chance(0.08):
        kwargs["predicate"] = Condition(c.choice(d.uniform_ids), "==", 0)
    if c.chance(0.1):
        kwargs["arrive"] = False
    if c.chance(0.05):
        kwargs["slots"] = 2
        kwargs["slot"] = Const(c.integer(0, 1))
    return Case(name, "load", dtype, shape, tuple(key), smem_shape, **kwargs)


def _huge_case(d: Draw, name: str) -> Case:
    """Arrays far too large to run: compiling must stay quick and end cleanly either way."""
    c = d.c
    kind = c.choice([
        "bulk-window", "long-1d", "too-long", "huge-2d-tiled", "huge-store", "huge-buffer", "int32-coordinate",
        "dim-2^63", "bulk-2^31",
    ])
    d.grid = (2, 1, 1)
    pid = CtaId("program_id", 0)
    if kind == "bulk-window":
        dtype = c.choice(["int8", "float32"])
        shape = (32768, 32768)
        return Case(name, "load", dtype, shape, (Window(Const(0), 32768), Span()), shape, grid=d.grid,
                    oob="undefined", compile_only=True)
    if kind in ("long-1d", "too-long"):
        dtype = "int8"
        shape = ((1 << 31) + 16,) if kind == "long-1d" else ((1 << 32) + 16,)
        return Case(name, "load", dtype, shape, (Window(Binary("*", pid, Const(64)), 64),), (64,),
                    grid=d.grid, compile_only=True)
    if kind == "huge-2d-tiled":
        shape = (65536, 65536)
        key = (Window(Binary("*", pid, Const(8)), 8), Window(Const(0), 64))
        return Case(name, c.choice(["load", "store"]), "bfloat16", shape, key, (1, 1, 8, 64),
                    transforms=(Tile((8, 64)),), swizzle=128, grid=d.grid, compile_only=True)
    if kind == "int32-coordinate":  # TMA coordinates are signed 32-bit
        shape = ((1 << 31) + 64,)
        return Case(name, c.choice(["load", "store"]), "int8", shape, (Window(Const((1 << 31) + 16), 16),), (16,),
                    grid=d.grid, compile_only=True)
    if kind == "dim-2^63":
        shape = (1 << 63, 16)
        return Case(name, "load", "int8", shape, (Window(Const(0), 8), Span()), (8, 16), grid=d.grid, compile_only=True)
    if kind == "bulk-2^31":
        shape = (1 << 31,)
        return Case(name, "load", "int8", shape, (Window(Const(0), 1 << 31),), shape, grid=d.grid,
                    oob="promise_in_bounds", compile_only=True)
    if kind == "huge-store":
        shape = (1 << 20, 1 << 12)
        key = (Window(Binary("*", pid, Const(16)), 16), Window(Const(1 << 11), 32))
        return Case(name, "store", "float32", shape, key, (16, 32), grid=d.grid, reduction="add",
                    compile_only=True)
    shape = (1 << 16, 1 << 16)
    return Case(name, "load", "float32", shape, (Window(Const(0), 1 << 16), Window(Const(0), 1 << 16)),
                shape, grid=d.grid, compile_only=True)


SCENARIOS = (
    ("load", 38), ("store", 18), ("reduce", 9), ("bulk", 11), ("cp_async", 8), ("collective", 11),
    ("huge", 2), ("partition", 3),
)


def draw_case(c: Chooser, name: str, hints: bool) -> Case:
    """One case; `hints`: whether `ad.multiple_of` exists (only then are starts hinted)."""
    d = Draw(c, hints)
    scenario = weighted(c, SCENARIOS)
    if scenario in ("load", "store"):
        case = _tma_case(d, name, scenario)
    elif scenario == "reduce":
        case = _tma_case(d, name, "store", c.choice(REDUCTIONS))
    elif scenario == "bulk":
        case = _bulk_case(d, name)
    elif scenario == "cp_async":
        case = _cp_async_case(d, name)
    elif scenario == "collective":
        case = _collective_case(d, name)
    elif scenario == "partition":
        case = _collective_case(d, name, partition=True)
    else:
        case = _huge_case(d, name)
    return replace(case, aims=(scenario,))


def case_for(seed: int, index: int, hints: bool) -> Case:
    """Case `index` of `seed`: independent of how many cases run and in which process."""
    return draw_case(RandomChooser(random.Random(f"{seed}:{index}")), f"{seed}:{index}", hints)


def cases(hints: bool):
    """The hypothesis strategy of cases."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw):
        return draw_case(HypothesisChooser(draw), "hypothesis", hints)

    return strategy()
