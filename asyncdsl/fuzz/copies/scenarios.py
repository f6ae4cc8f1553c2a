"""The kinds of case: TMA loads and stores (with reductions), bulk copies, cp.async copies,
collective loads in clusters, and arrays too large to run (compile only)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from . import expr
from .cases import Case, Condition, Entry, Span, Squeeze, Window
from .draw import (
    DTYPE_WEIGHTS,
    GRIDS,
    MAX_ELEMENTS,
    Chooser,
    Draw,
    divisors,
    hide_full_dims,
    smem_shape_for,
    unit,
    weighted,
)
from .expr import Binary, Const, CtaId
from .layout import ELEMENT_TYPES, Tile, Transform, tiled_dims
from .semantics import ALLOWED_REDUCTIONS


def _alignment(chain: Sequence[Transform], window_dims: Sequence[int]) -> dict[int, int]:
    """The tile each GMEM dim's window start must be a multiple of."""
    return {dim: tile for dim, tile, _ in tiled_dims(chain, window_dims)}


def _tensor_window(d: Draw, dtype: str, shape: tuple[int, ...], direction: str):
    """(key, transforms, smem shape, swizzle) of a TMA-style window of `shape`."""
    c = d.c
    rank = len(shape)
    plan: list[int | Span | str] = []  # per dim: a window's size, a Span, "squeeze" or "full"
    for dim, size in enumerate(shape):
        minor = dim == rank - 1
        weights = [("squeeze", 0.3), ("window", 6), ("full", 3), ("span", 1)] if minor else [
            ("squeeze", 3), ("window", 4), ("full", 2), ("span", 1)]
        kind = weighted(c, weights)
        if kind == "window":
            plan.append(d.window_size(size, minor, dtype))
        elif kind == "span":
            plan.append(d.span(size))
        else:
            plan.append(kind)
    window_dims, window = [], []
    for dim, (item, size) in enumerate(zip(plan, shape)):
        if isinstance(item, int):
            window_dims.append(dim)
            window.append(item)
        elif item == "full":
            window_dims.append(dim)
            window.append(size)
        elif isinstance(item, Span):
            lo, hi, _ = slice(item.lo, item.hi).indices(size)
            window_dims.append(dim)
            window.append(max(1, hi - lo))
    chain = d.transforms(window, dtype, [shape[g] for g in window_dims]) if window else ()
    aligned = _alignment(chain, window_dims)
    packed = ELEMENT_TYPES[dtype].packed
    key: list[Entry] = []
    for dim, (item, size) in enumerate(zip(plan, shape)):
        if item == "squeeze":
            key.append(Squeeze(d.squeeze_index(size)))
        elif item == "full":
            key.append(Span())
        elif isinstance(item, Span):
            key.append(item)
        else:
            assert isinstance(item, int)
            align = aligned.get(dim, 1)
            if packed and dim == rank - 1:
                align = math.lcm(align, 2)
            key.append(Window(start_for(d, size, item, align, direction), item))
    smem_shape = smem_shape_for(c, chain, window)
    return hide_full_dims(c, key), chain, smem_shape, d.swizzle(smem_shape, dtype)


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


def tma_case(d: Draw, name: str, direction: str, reduction: str | None = None) -> Case:
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
    kwargs: dict[str, Any] = dict(transforms=chain, swizzle=swizzle, grid=d.grid, reduction=reduction)
    if c.chance(0.06):
        kwargs["oob"] = c.choice(["undefined", "promise_in_bounds"])
    return Case(name, direction, dtype, shape, None if key is None else tuple(key), smem_shape,
                **_features(d, kwargs, direction))


def bulk_case(d: Draw, name: str) -> Case:
    """A window that is one contiguous run of the array (leading indices, one window, whole
    trailing dims), moved with oob="undefined" or "promise_in_bounds": a plain bulk copy of any
    length.  Some windows are not runs, and take the TMA path."""
    c = d.c
    dtype = weighted(c, DTYPE_WEIGHTS[:15] + (("int4", 0.3),))
    direction = "store" if c.chance(0.35) else "load"
    d.grid = weighted(c, GRIDS)
    if c.chance(0.2):
        case = tma_case(d, name, direction)
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
    key: list[Entry] = [
        Squeeze(d.squeeze_index(shape[k]) if c.chance(0.3) else Const(c.integer(0, shape[k] - 1)))
        for k in range(squeezed)
    ]
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
        chain = (Tile((c.choice(divisors(size)), trailing[0])),)
    oob = c.choice(["undefined", "undefined", "promise_in_bounds"])
    kwargs: dict[str, Any] = dict(transforms=chain, grid=d.grid, oob=oob)
    key = hide_full_dims(c, key)
    smem_shape = smem_shape_for(c, chain, window)
    features = _features(d, kwargs, direction)
    return Case(name, direction, dtype, tuple(shape), tuple(key), smem_shape, **features)


def cp_async_case(d: Draw, name: str) -> Case:
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
    smem_shape = smem_shape_for(c, chain, (rows, cols))
    kwargs: dict[str, Any] = dict(transforms=chain, swizzle=swizzle, grid=d.grid, implementation="cp_async",
                                  barrier=c.chance(0.6))
    if c.chance(0.03):
        kwargs["predicate"] = d.condition()
    if c.chance(0.03):
        kwargs["oob"] = "undefined"
    return Case(name, "load", dtype, shape, tuple(key), smem_shape, **kwargs)


CLUSTERS = (((2, 1, 1), 4), ((4, 1, 1), 2), ((1, 2, 1), 2), ((2, 2, 1), 2))


def collective_case(d: Draw, name: str, partition: bool = False) -> Case:
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
        base = c.choice(d.uniform_ids)
        step = rows if not chain else tile_rows * c.choice([1, 2])
        row_start = Binary("*", base, Const(step))
    key: list[Entry] = [Window(row_start, rows), Window(Const(0), cols)]
    if len(shape) == 3:
        index = Const(c.integer(0, shape[0] - 1)) if c.chance(0.5) else c.choice(d.uniform_ids)
        key.insert(0, Squeeze(index))
    smem_shape = smem_shape_for(c, chain, (rows, cols))
    kwargs: dict[str, Any] = dict(transforms=chain, swizzle=d.swizzle(smem_shape, dtype), grid=d.grid,
                                  cluster=d.cluster, collective=collective)
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


def huge_case(d: Draw, name: str) -> Case:
    """Arrays far too large to run: compiling must stay quick and end cleanly either way."""
    c = d.c
    kind = c.choice([
        "bulk-window", "long-1d", "too-long", "huge-2d-tiled", "huge-store", "huge-buffer",
        "int32-coordinate", "dim-2^63", "bulk-2^31",
    ])
    d.grid = (2, 1, 1)
    pid = CtaId("program_id", 0)
    shape: tuple[int, ...]
    key: tuple[Entry, ...]
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
        key = (Window(Const((1 << 31) + 16), 16),)
        direction = c.choice(["load", "store"])
        return Case(name, direction, "int8", shape, key, (16,), grid=d.grid, compile_only=True)
    if kind == "dim-2^63":
        shape = (1 << 63, 16)
        key = (Window(Const(0), 8), Span())
        return Case(name, "load", "int8", shape, key, (8, 16), grid=d.grid, compile_only=True)
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




# Each misuse: (where, text, what the base case must leave out so the keyword is not repeated).
MISUSES = (
    ("transforms", "(ad.TransposeTransform((0, 0)),)", None),
    ("transforms", "(ad.TransposeTransform((1, 2)),)", None),
    ("transforms", "(ad.TileTransform((0, 8)),)", None),
    ("transforms", "(ad.TileTransform((-8,)),)", None),
    ("transforms", "(ad.TileTransform((8, 16), ad.Rounding.UP),)", None),
    ("transforms", "(ad.TileTransform(8),)", None),
    ("transforms", "((8, 16),)", None),
    ("transforms", "ad.TileTransform", None),
    ("key", "ad.ds(0.5, 8)", None),
    ("key", "ad.ds(0, 0)", None),
    ("key", "ad.ds(0, -8)", None),
    ("key", "ad.ds(0, True)", None),
    ("key", "ad.ds(0, 8.0)", None),
    ("key", "::2", None),
    ("key", "None", None),
    ("key", "[0, 1]", None),
    ("key", "1.5", None),
    ("key", "..., ...", None),
    ("key", "ad.program_id(0) == 0", None),
    ("copy-option", "swizzle='128'", "swizzle"),
    ("copy-option", "swizzle=256", "swizzle"),
    ("copy-option", "swizzle=-32", "swizzle"),
    ("copy-option", "swizzle=64.0", "swizzle"),
    ("copy-option", "collective='w'", "collective"),
    ("copy-option", "reduction='mul'", "reduction"),
    ("copy-option", "reduction=1", "reduction"),
    ("copy-option", "oob='clamp'", "oob"),
    ("copy-option", "oob=None", "oob"),
    ("copy-option", "implementation='wgmma'", "implementation"),
    ("copy-option", "predicate=True", "predicate"),
    ("copy-option", "predicate=ad.program_id(0)", "predicate"),
    ("copy-option", "partition='halves'", "partition"),
    ("copy-option", "arrive='no'", "arrive"),
    ("kernel-option", "block=96", None),
    ("kernel-option", "descriptors='texture'", None),
)
# Per misused keyword: the case fields it resets, so that only the misuse is in play.
NEUTRAL: dict[str, dict[str, Any]] = {
    "swizzle": {"swizzle": None}, "collective": {"collective": (), "cluster": (1, 1, 1)},
    "reduction": {"reduction": None}, "oob": {"oob": "zeros"}, "implementation": {"implementation": "tma"},
    "predicate": {"predicate": None}, "partition": {"partition": None}, "arrive": {"arrive": True},
}


def misuse_case(d: Draw, name: str) -> Case:
    """A plain copy with one argument the API must refuse, cleanly and at the user's line."""
    c = d.c
    case = tma_case(d, name, c.choice(["load", "store"]))
    where, text, keyword = c.choice(MISUSES)
    if where == "key" and case.key is None:
        case = replace(case, key=(Span(),))
    changes = dict(NEUTRAL.get(keyword, {})) if keyword is not None else {}
    if keyword == "collective" or case.collective:
        changes.update(collective=(), cluster=(1, 1, 1))
    return replace(case, misuse=(where, text), **changes)
