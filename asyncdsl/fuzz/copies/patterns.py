"""Known ways a case can go wrong, recognised from its description: the summary counts the
failures of each, so that a run says which classes of bug it hit and how often."""

from __future__ import annotations

from . import expr
from .cases import Case, Rest, Squeeze, Window
from .layout import tiled_dims
from .rules import engine, tile_boxes
from .window import UserError, resolve_key, window_gmem_dims


def _folded(value: expr.Expr) -> bool:
    return expr.is_traced(value) and expr.static_value(value) is not None


def patterns(case: Case) -> list[str]:
    found = []
    if case.compile_only:  # arrays too large for the model's geometry
        return ["huge-shape"] if case.scenario == "huge" else []
    if case.misuse:
        return ["api-misuse"]
    if case.collective and case.element.packed:
        found.append("4bit-multicast")
    key = case.key or ()
    for position, entry in enumerate(key):
        if isinstance(entry, Rest) and any(
            isinstance(e, Squeeze) and expr.static_value(e.index) is None for e in key[:position]
        ):
            found.append("traced-index-before-ellipsis")
    try:
        dims = resolve_key(case)
    except UserError:
        return found
    ctas = expr.ctas(case.grid, case.cluster)
    cuts = {d: (t, down) for d, t, down in tiled_dims(case.transforms, window_gmem_dims(dims))}
    tiles = {d: t for d, (t, _) in cuts.items()}
    for d, (dim, size) in enumerate(zip(dims, case.gmem_shape)):
        values = [expr.evaluate(dim.start, cta) for cta in ctas]
        traced = expr.static_value(dim.start) is None
        if _folded(dim.start) and min(values) < 0:
            found.append("folded-negative-index")
        tile, down = cuts.get(d, (0, False))
        if traced and (size == 1 or size <= tile or (down and size // tile == 1)):
            found.append("traced-start-on-unit-dim")  # a dim of one element, or of one tile
        minor = d == len(dims) - 1 and not dim.squeezed and d not in tiles and size > 1
        if minor and engine(case, dims) == "tma" and any(v * case.element.bits % 128 for v in values):
            found.append("minor-start-off-16-bytes")
        if traced and d in tiles and any(v % tiles[d] for v in values):
            found.append("traced-misaligned-tile-start")
        if traced and case.element.packed and d == len(dims) - 1 and any(v % 2 for v in values):
            found.append("odd-4bit-start")
        if case.direction == "store" and not dim.squeezed and not expr.is_traced(dim.start) and values[0] < 0:
            found.append("literal-negative-store-start")
        if case.direction == "store" and expr.is_traced(dim.start) and min(values) < 0:
            found.append("traced-negative-store-start")
    squeezed = [d for d, dim in enumerate(dims) if dim.squeezed]
    if len(squeezed) >= 2 and len(squeezed) + len(case.smem_shape) > 5 and any(
        expr.is_traced(dims[d].start)
        and not all(0 <= expr.evaluate(dims[d].start, cta) < case.gmem_shape[d] for cta in ctas)
        for d in squeezed
    ):
        found.append("collapsed-squeezes-out-of-bounds")  # past 5 dims, squeezed dims merge
    if any(isinstance(e, Window) and e.size > 256 for e in key):
        found.append("box-over-256")
    if case.element.packed and tile_boxes(case, dims):
        found.append("4bit-tile-boxes")  # their offsets once counted an element as a byte
    return sorted(set(found))
