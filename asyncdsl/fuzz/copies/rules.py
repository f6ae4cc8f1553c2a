"""Which copy engine a case takes, which rules it breaks, and whether it must succeed.

The rules are the documented ones (README, docs/hardware.md, tracker), each checked where
asyncdsl checks it: while compiling (what the frontend sees as literals, and what the
divisibility analysis can prove of traced values) or at run time (a traced value in a CTA where
the copy's predicate holds, or a false `ad.multiple_of` wherever it is computed).

- TMA boxes of at most 256 per dim whose minor dim spans a multiple of 16 bytes (exactly the
  swizzle, when swizzled); tiles that divide the window and start on tile boundaries; 4-bit
  minor windows of whole bytes;
- a 2-d window tiled by one 2-d tiling from an array that is not whole tiles goes one box a tile
  (`tile_boxes`): no tile boundary needed, nothing cut, each box at a 128-byte SMEM offset;
- a box starts on a 16-byte boundary of the GMEM minor dim (docs/hardware.md §3.3): a literal
  start must be a multiple of 16 bytes there, a traced one provably so (`expr.known_divisor`,
  the documented divisibility analysis, or an `ad.multiple_of` hint), else a compile-time error;
- TMA coordinates are signed 32-bit (docs/hardware.md §3.1): a literal start or index whose
  coordinate does not fit is refused while compiling;
- a TMA store (or reduction) at a negative coordinate faults on the H200: refused while compiling
  for a literal start or index, an error at run time for a traced one;
- bulk copies of whole 16-byte units at 16-byte aligned addresses; under "undefined" a store's
  run clamped at the array's end must stay inside its window (it must not overwrite other
  elements); "promise_in_bounds" and cp.async windows inside the array;
- the reduction table.

`check` raises `UserError` for a case that breaks a rule (no run may then succeed), rules checked
while compiling before those checked at run time.  `certainly_valid` is conservative the other
way: when it gives a reason, the case obeys every rule, so a clean error is still wrong.
"""

from __future__ import annotations

import math

import numpy as np

from . import expr
from .cases import Case
from .layout import Tile, Transpose, Unfit, byte_size, tiled_dims, transformed, transformed_shape
from .model import bulk_moved, flat_run, predicate_holds, window_mask
from .render import HARNESS_RANK
from .semantics import reduction_allowed
from .window import Dim, UserError, window_gmem_dims, window_shape

SMEM_BUDGET = 200 * 1024  # comfortably under the 227 KiB a CTA may use, alignment padding included
MAX_BOX = 256
SWIZZLES = (None, 0, 16, 32, 64, 128)
TMA_SMEM_ALIGNMENT = 128  # bytes: where a TMA copy may land in shared memory
COORDINATES = (-(1 << 31), 1 << 31)  # TMA coordinates are signed 32-bit
BULK_ALIGNMENT = 16  # bytes


def slot_bytes(case: Case) -> int:
    """Bytes from one buffer slot to the next."""
    return byte_size(case.smem_shape, case.element)


def swizzle_bytes(case: Case) -> int:
    return 0 if case.swizzle in (None, 0, 16) else case.swizzle


def contiguous_run(case: Case, dims: tuple[Dim, ...]) -> bool:
    """Whether the buffer, filled densely with the transformed window, holds consecutive
    elements of the array (then a bulk copy can move it as one run of bytes)."""
    shape = window_shape(dims)
    strides = [math.prod(case.gmem_shape[d + 1:]) for d in window_gmem_dims(dims)]
    offsets = np.zeros(shape, np.int64)
    for position, (size, stride) in enumerate(zip(shape, strides)):
        axis = [1] * len(shape)
        axis[position] = size
        offsets = offsets + (np.arange(size, dtype=np.int64) * stride).reshape(axis)
    try:
        if transformed_shape(case.transforms, shape) != case.smem_shape:
            return False
    except Unfit:
        return False
    flat = np.ascontiguousarray(transformed(case.transforms, offsets)).reshape(-1)
    return bool(np.array_equal(flat, np.arange(flat.size)))


def engine(case: Case, dims: tuple[Dim, ...]) -> str:
    """"tma", "bulk" or "cp_async": which engine the documented rules send the copy to."""
    if case.implementation == "cp_async":
        return "cp_async"
    plain = swizzle_bytes(case) == 0 and case.swizzle in SWIZZLES
    tensor_only = case.oob == "zeros" or not plain or case.reduction or case.collective
    if not tensor_only and contiguous_run(case, dims):
        return "bulk"
    return "tma"


def _ctas(case: Case) -> list[expr.Cta]:
    """The CTAs whose values a run-time check of the copy sees: those where its predicate holds
    (a copy the predicate skips is not checked)."""
    return [cta for cta in expr.ctas(case.grid, case.cluster) if predicate_holds(case, cta)]


def _literal(start: expr.Expr) -> int | None:
    """The int asyncdsl sees while compiling (a literal, or arithmetic the frontend folds)."""
    return expr.static_value(start)


def _must_divide(start: expr.Expr, n: int, reason: str) -> None:
    """A start that must be a multiple of `n`: checked while compiling, on the literal or on what
    the divisibility analysis proves of a traced value (a false hint fails at run time instead:
    `_check_hints`)."""
    value = _literal(start)
    if value is not None:
        if value % n:
            raise UserError(reason.format(value))
    elif not expr.provably_multiple(start, n):
        raise UserError(
            reason.format(f"a traced value only provably a multiple of {expr.known_divisor(start)}"))


# -- rules checked while compiling --------------------------------------------------------------


def _check_common(case: Case, dims: tuple[Dim, ...]) -> None:
    if case.partition and case.arch != "sm_100a":
        raise UserError("partitioned/replicated collective loads need arch='sm_100a'")
    if case.direction == "store" and case.collective:
        raise UserError("stores cannot be collective")
    if case.swizzle not in SWIZZLES:
        raise UserError(f"swizzle {case.swizzle} is not 0, 32, 64 or 128")
    if case.reduction and not reduction_allowed(case.reduction, case.element):
        raise UserError(f"reduction {case.reduction!r} does not take {case.dtype}")
    slot = None if expr.is_traced(case.slot) else expr.static_value(case.slot)
    if case.slots and slot is not None and not 0 <= slot < case.slots:
        raise UserError(f"buffer slot {slot} out of range")
    try:
        shape = transformed_shape(case.transforms, window_shape(dims))
    except Unfit as unfit:
        raise UserError(str(unfit)) from None
    if shape != case.smem_shape:
        raise UserError(f"buffer {case.smem_shape} is not the transformed window {shape}")


def _check_packed(case: Case, dims: tuple[Dim, ...]) -> None:
    """4-bit elements travel as bytes: the minor window is whole bytes and stays minor."""
    if case.gmem_shape[-1] % 2:
        raise UserError("4-bit array with an odd minor dim")
    minor = dims[-1]
    if minor.size is None:  # squeezed
        raise UserError("4-bit copies must take a window of the minor dim, not index it")
    if minor.size % 2:
        raise UserError("4-bit minor window of odd size")
    _must_divide(minor.start, 2, "4-bit minor window starting at {}, not a whole byte")
    rank = len(window_shape(dims))
    for transform in case.transforms:
        if isinstance(transform, Transpose):
            if transform.permutation[-1] != rank - 1:
                raise UserError("a transpose moves the minor dim of 4-bit elements")
        else:
            if transform.tiling[-1] % 2:
                raise UserError("odd innermost tile of 4-bit elements")
            rank += len(transform.tiling)


def tile_boxes(case: Case, dims: tuple[Dim, ...]) -> bool:
    """Whether the copy goes one TMA box per tile (or column of tiles) through the untiled array:
    a 2-d window through one 2-d tiling, not rounding, that some window dim of the array is
    neither at most nor a multiple of, or whose start along a window dim is traced and not
    provably a multiple of its tile.  Boxes need no tile boundary and cut nothing."""
    if len(case.transforms) != 1 or not isinstance(case.transforms[0], Tile):
        return False
    tile = case.transforms[0]
    labels = window_gmem_dims(dims)
    if len(tile.tiling) != 2 or tile.round_down or len(labels) != 2:
        return False
    return any((case.gmem_shape[d] > t and case.gmem_shape[d] % t)
               or (dims[d].traced and not expr.provably_multiple(dims[d].start, t))
               for d, t in zip(labels, tile.tiling))


def _check_tile_boxes(case: Case, dims: tuple[Dim, ...]) -> None:
    """One box a tile lands each at the tile's offset in the buffer, which TMA must be able to
    write (128 bytes); a column of tiles goes in boxes of up to 256 rows."""
    tile = case.transforms[0]
    assert isinstance(tile, Tile), "a copy in boxes of its tiles has one 2-d tiling (`tile_boxes`)"
    rows, columns = tile.tiling
    if window_shape(dims)[1] == columns:
        return
    if rows > MAX_BOX:
        raise UserError(f"a box a tile of {rows} rows")
    tile_bytes = byte_size((rows, columns), case.element)
    if tile_bytes % TMA_SMEM_ALIGNMENT:
        raise UserError(f"one box a tile of {tile_bytes} bytes: boxes off 128-byte SMEM boundaries")


def _tiling_cuts(case: Case, dims: tuple[Dim, ...]) -> dict[int, int]:
    """GMEM dims a rounding-down tiling cuts (dim -> kept size); raises for tilings that do
    not fit the array or start off a tile boundary (TMA only).  A copy that goes one box a tile
    (`tile_boxes`) cuts nothing and has rules of its own."""
    if tile_boxes(case, dims):
        _check_tile_boxes(case, dims)
        return {}
    cut = {}
    labels = window_gmem_dims(dims)
    for gmem_dim, tile, round_down in tiled_dims(case.transforms, labels):
        size = case.gmem_shape[gmem_dim]
        if size > tile and size % tile:
            if not round_down:
                raise UserError(f"GMEM dim {gmem_dim} of {size} is no multiple of its tile {tile}")
            cut[gmem_dim] = size // tile * tile
        _must_divide(dims[gmem_dim].start, tile,
                     f"start {{}} along dim {gmem_dim} is not on a boundary of its tile {tile}")
    return cut


def _coordinate(case: Case, dims: tuple[Dim, ...], dim: int, start: int) -> int:
    """The TMA coordinate of a literal start: in tiles along a tiled dim, in bytes along the
    minor dim of 4-bit elements (copied as bytes), else the start itself."""
    tiles = {} if tile_boxes(case, dims) else {
        d: t for d, t, _ in tiled_dims(case.transforms, window_gmem_dims(dims))}
    if dim == len(dims) - 1 and case.element.packed:
        start //= 2
        tiles = {d: t // 2 for d, t in tiles.items()}
    return start // tiles.get(dim, 1)


def _check_tma(case: Case, dims: tuple[Dim, ...]) -> None:
    element = case.element
    shape = list(case.smem_shape)
    inner_bytes = byte_size(shape[-1:], element)
    if element.packed:
        shape[-1] //= 2  # a box of bytes
    if not case.collective and not tile_boxes(case, dims) and max(shape) > MAX_BOX:
        raise UserError(f"TMA box {tuple(shape)} over {MAX_BOX}")
    # A minor dim of 1 may be dropped as a unit dim, leaving another dim minor: no verdict then.
    if case.smem_shape[-1] > 1 and inner_bytes % 16:
        raise UserError(f"minor box dim of {inner_bytes} bytes")
    if case.smem_shape[-1] > 1 and swizzle_bytes(case) and inner_bytes != case.swizzle:
        raise UserError(f"swizzle {case.swizzle} with a minor dim of {inner_bytes} bytes")
    for dim, d in enumerate(dims):
        value = _literal(d.start)
        if value is None:
            continue
        if case.direction == "store" and value < 0:
            raise UserError(f"store at literal negative coordinate {value} along dim {dim} (the H200 faults)")
        coordinate = _coordinate(case, dims, dim, value)
        if not COORDINATES[0] <= coordinate < COORDINATES[1]:
            raise UserError(f"start {value} does not fit the signed 32-bit coordinates of TMA")
    minor = dims[-1]
    if not minor.squeezed:  # a box starts on a 16-byte boundary of the minor dim (docs/hardware.md §3.3)
        step = 128 // math.gcd(128, element.bits)
        _must_divide(minor.start, step,
                     f"minor window start {{}} is not on a 16-byte boundary ({step} elements)")


def _check_static_bounds(case: Case, dims: tuple[Dim, ...], what: str) -> None:
    """A window that must lie inside the array: its literal starts are checked while compiling."""
    for dim, (d, size) in enumerate(zip(dims, case.gmem_shape)):
        value = _literal(d.start)
        if value is not None and (value < 0 or value + d.extent > size):
            raise UserError(f"{what} leaves the array along dim {dim}")


def _literal_bulk_offset(case: Case, dims: tuple[Dim, ...]) -> int:
    """The bytes the literal starts contribute to a bulk copy's GMEM address."""
    strides = [math.prod(case.gmem_shape[d + 1:]) for d in range(len(dims))]
    return (sum((_literal(d.start) or 0) * stride for d, stride in zip(dims, strides))
            * case.element.numpy.itemsize)


def _all_literal(dims: tuple[Dim, ...]) -> bool:
    return all(_literal(d.start) is not None for d in dims)


def _check_bulk(case: Case, dims: tuple[Dim, ...]) -> None:
    if case.element.packed:
        raise UserError("bulk copies of 4-bit elements")
    transfer = byte_size(case.smem_shape, case.element)
    if transfer % BULK_ALIGNMENT:
        raise UserError(f"bulk copy of {transfer} bytes")
    if _literal_bulk_offset(case, dims) % BULK_ALIGNMENT:
        raise UserError("bulk copy whose literal starts put it off a 16-byte boundary")
    total = byte_size(case.gmem_shape, case.element)
    literal = _all_literal(dims)
    if case.oob == "promise_in_bounds":
        _check_static_bounds(case, dims, "a bulk copy promised in bounds")
    elif not literal and total % BULK_ALIGNMENT:
        raise UserError(f"oob='undefined' bulk copy with traced starts on an array of {total} bytes")
    if not literal:
        return
    cta = expr.ctas(case.grid, case.cluster)[0]  # literal starts: the same window everywhere
    _, moved = bulk_moved(case, dims, cta)
    if moved % BULK_ALIGNMENT:
        raise UserError(f"bulk copy clamped to {moved} bytes")
    if case.direction == "store" and case.oob == "undefined" and _writes_outside(case, dims, cta):
        raise UserError("bulk store whose clamped run writes outside its window")


def _writes_outside(case: Case, dims: tuple[Dim, ...], cta: expr.Cta) -> bool:
    """Whether a bulk store's run of bytes, clamped at the array's end, holds an element that
    is not in the window's part inside the array (it would overwrite another element)."""
    offset, moved = bulk_moved(case, dims, cta)
    item = case.element.numpy.itemsize
    written = np.arange(offset // item, (offset + moved) // item)
    inside, index = window_mask(dims, [expr.evaluate(d.start, cta) for d in dims], list(case.gmem_shape))
    window = np.ravel_multi_index(tuple(i[inside] for i in index), case.gmem_shape)
    return not np.isin(written, window).all()


def _check_cp_async(case: Case, dims: tuple[Dim, ...]) -> None:
    if case.element.packed:
        raise UserError("cp.async copies of 4-bit elements")
    if case.direction == "store" or case.collective or case.predicate is not None or case.oob == "undefined":
        raise UserError("cp.async copies are unpredicated, non-collective loads without oob='undefined'")
    _check_static_bounds(case, dims, "a cp.async copy")
    shape = window_shape(dims)
    if case.transforms or swizzle_bytes(case):
        tile = case.transforms[0] if case.transforms else None
        plain_2d_tile = tile is None or (
            isinstance(tile, Tile) and len(tile.tiling) == 2 and not tile.round_down
        )
        if len(case.transforms) > 1 or not plain_2d_tile:
            raise UserError("cp.async takes no transforms or one 2-D tiling")
        if len(shape) != 2 or window_gmem_dims(dims)[-1] != len(case.gmem_shape) - 1:
            raise UserError("tiled/swizzled cp.async needs a 2-D window of the array's minor dim")
        row = tile.tiling[1] if isinstance(tile, Tile) else shape[1]
        if swizzle_bytes(case) and row * case.element.numpy.itemsize != case.swizzle:
            raise UserError("cp.async swizzle with rows of another width")


# -- rules checked at run time ------------------------------------------------------------------


def _check_hints(case: Case, dims: tuple[Dim, ...]) -> None:
    """`ad.multiple_of(value, n)` is checked where it is computed, copy or no copy."""
    for dim in dims:
        for hint in expr.hints(dim.start):
            for cta in expr.ctas(case.grid, case.cluster):
                value = expr.evaluate(hint.value, cta)
                if value % hint.multiple:
                    raise UserError(
                        f"hint: {value} is not a multiple of {hint.multiple} (CTA {cta.program_id})",
                        compile_time=False,
                    )


def _run_time_failure(case: Case, reason: str, broken) -> None:
    """Raise if `broken(cta)` in a CTA where the copy runs (a run-time check)."""
    for cta in _ctas(case):
        if broken(cta):
            raise UserError(f"{reason} (CTA {cta.program_id})", compile_time=False)


def _out_of_bounds(case: Case, dims: tuple[Dim, ...], cta: expr.Cta) -> bool:
    for dim, size in zip(dims, case.gmem_shape):
        start = expr.evaluate(dim.start, cta)
        if start < 0 or start + dim.extent > size:
            return True
    return False


def _check_at_run_time(case: Case, dims: tuple[Dim, ...], chosen: str) -> None:
    _check_hints(case, dims)
    if chosen == "tma" and case.direction == "store":
        negative = [d for d in dims if _literal(d.start) is None]
        _run_time_failure(
            case, "a TMA store at a traced negative coordinate (the H200 faults; the store is skipped)",
            lambda cta: any(expr.evaluate(d.start, cta) < 0 for d in negative),
        )
    in_bounds = chosen == "cp_async" or (chosen == "bulk" and case.oob == "promise_in_bounds")
    if in_bounds:
        _run_time_failure(case, f"a {chosen} window leaves the array",
                          lambda cta: _out_of_bounds(case, dims, cta))
    if chosen == "bulk":
        _run_time_failure(
            case, "a bulk copy at a traced address off 16 bytes",
            lambda cta: flat_run(case, dims, cta) % BULK_ALIGNMENT,
        )
        if case.direction == "store" and case.oob == "undefined":
            _run_time_failure(
                case, "a bulk store whose clamped run leaves its window (the store is skipped)",
                lambda cta: _writes_outside(case, dims, cta),
            )


def check_compile_only(case: Case, dims: tuple[Dim, ...]) -> None:
    """The TMA rules, for a tensor copy too large to run (`engine` would build its arrays)."""
    _check_tma(case, dims)


def check(case: Case, dims: tuple[Dim, ...], chosen: str) -> dict[int, int]:
    """Raise UserError if the case breaks a rule; returns the GMEM dims rounding cuts short."""
    _check_common(case, dims)
    if case.element.packed:
        _check_packed(case, dims)
    cut = {}
    if chosen == "tma":
        cut = _tiling_cuts(case, dims)
        _check_tma(case, dims)
    elif chosen == "bulk":
        _check_bulk(case, dims)
    else:
        _check_cp_async(case, dims)
    _check_at_run_time(case, dims, chosen)
    return cut


# -- certainly valid ----------------------------------------------------------------------------


def _genuine(start: expr.Expr) -> bool:
    """A literal, or a traced value the frontend does not fold into a literal."""
    return not expr.is_traced(start) or expr.static_value(start) is None


def _harness_fits(case: Case) -> bool:
    """Whether the harness can move the whole buffer (bulk copies; 4-bit: TMA slabs)."""
    element, shape = case.element, case.buffer_shape
    if byte_size(shape, element) % 16:
        return False
    if element.packed:
        slab = list(shape[max(0, len(shape) - HARNESS_RANK):])
        several = len(slab) < len(shape)
        slab[-1] //= 2
        aligned = not several or byte_size(slab, element) * 2 % TMA_SMEM_ALIGNMENT == 0
        return max(slab) <= MAX_BOX and slab[-1] % 16 == 0 and aligned
    return True


def _sound_layout(case: Case, dims: tuple[Dim, ...]) -> bool:
    """The TMA view rules that need the final view (strides, rank): sufficient conditions."""
    last = len(case.gmem_shape) - 1
    if dims[last].squeezed or byte_size(case.gmem_shape[-1:], case.element) % 16:
        return False
    rank = len(window_shape(dims))
    for transform in case.transforms:
        if isinstance(transform, Transpose):
            if transform.permutation[-1] != rank - 1:
                return False
        else:
            rank += len(transform.tiling)
    squeezed = sum(d.squeezed for d in dims)
    return squeezed + len(case.smem_shape) <= 5


def certainly_valid(case: Case, dims: tuple[Dim, ...], chosen: str) -> str | None:
    """Why the case must compile and run (None: it may be refused).  Call after `check`."""
    if case.arch != "sm_90a" or case.partition or case.compile_only or not _harness_fits(case):
        return None
    if byte_size(case.buffer_shape, case.element) > SMEM_BUDGET:
        return None
    if not all(_genuine(d.start) for d in dims) or (case.slots and not _genuine(case.slot)):
        return None
    if case.slots and (expr.is_traced(case.slot) or slot_bytes(case) % TMA_SMEM_ALIGNMENT):
        return None
    if case.predicate is not None and expr.static_value(case.predicate.lhs) is not None:
        return None
    if chosen == "tma":
        return _tma_certain(case, dims)
    if chosen == "bulk":
        return _bulk_certain(case, dims)
    return _cp_async_certain(case, dims)


def _tma_certain(case: Case, dims: tuple[Dim, ...]) -> str | None:
    if not _sound_layout(case, dims) or case.smem_shape[-1] == 1:
        return None
    for gmem_dim, tile, _ in tiled_dims(case.transforms, window_gmem_dims(dims)):
        if not expr.provably_multiple(dims[gmem_dim].start, tile):
            return None
    if case.element.packed and not expr.provably_multiple(dims[-1].start, 2):
        return None
    if case.direction == "store" and case.oob != "zeros":
        return None
    if case.collective:
        group = math.prod(case.cluster["xyz".index(d)] for d in set(case.collective))
        part_bytes = byte_size(case.smem_shape, case.element) // group
        if len(case.smem_shape) < 2 or case.smem_shape[0] % group or max(case.smem_shape) > MAX_BOX:
            return None
        if part_bytes % TMA_SMEM_ALIGNMENT:  # each CTA's part lands at a multiple of its size
            return None
        return "a collective TMA load within the documented rules"
    return "a TMA copy within the documented rules"


def _static_starts(dims: tuple[Dim, ...]) -> bool:
    return all(not d.traced for d in dims)


def _bulk_certain(case: Case, dims: tuple[Dim, ...]) -> str | None:
    # Traced starts too: every rule of bulk copies, run-time checks included, is `check`'s.
    return "a bulk copy of whole, aligned 16-byte units"


def _cp_async_certain(case: Case, dims: tuple[Dim, ...]) -> str | None:
    if not _static_starts(dims) or len(case.gmem_shape) != 2 or any(d.squeezed for d in dims):
        return None
    item = case.element.numpy.itemsize
    rows, cols = window_shape(dims)
    tile = case.transforms[0] if case.transforms else None  # one 2-D tiling at most (`_check_cp_async`)
    row_bytes = (tile.tiling[1] if isinstance(tile, Tile) else cols) * item
    row_start, column_start = (expr.static_value(d.start) for d in dims)
    assert row_start is not None and column_start is not None, "the starts are static"
    offset = (row_start * case.gmem_shape[1] + column_start) * item
    needs = (row_bytes, case.gmem_shape[1] * item if rows > 1 else 0, offset, cols * item)
    if any(n % 4 for n in needs):
        return None
    return "an in-bounds cp.async copy of 4-byte aligned rows"
