"""Which copy engine a case takes, which rules it breaks, and whether it must succeed.

The rules are the documented ones (README, tracker): TMA boxes of at most 256 per dim whose
minor dim spans a multiple of 16 bytes (exactly the swizzle, when swizzled), tiles that divide
the window and start on tile boundaries, 4-bit minor windows of whole bytes, the reduction
table, bulk copies of whole 16-byte units, cp.async windows inside the array, stores that
start at a literal negative coordinate refused while compiling.  `check` raises `UserError`
for a case that breaks one (no run may then succeed).  `certainly_valid` is conservative the
other way: when it gives a reason, the case obeys every rule, so a clean error is still wrong.
"""

from __future__ import annotations

import math

import numpy as np

from . import expr
from .cases import Case
from .layout import Tile, Transpose, Unfit, byte_size, tiled_dims, transformed, transformed_shape
from .model import bulk_moved, flat_run, predicate_holds
from .render import HARNESS_RANK
from .semantics import reduction_allowed
from .window import Dim, UserError, window_gmem_dims, window_shape

SMEM_BUDGET = 200 * 1024  # comfortably under the 227 KiB a CTA may use, alignment padding included
MAX_BOX = 256
SWIZZLES = (None, 0, 16, 32, 64, 128)
TMA_SMEM_ALIGNMENT = 128  # bytes: where a TMA copy may land in shared memory


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


def _ctas(case: Case, literal: bool = False) -> list[expr.Cta]:
    """The CTAs whose values a rule checks: those where the copy's predicate holds, or all of
    them for a rule on literal values (checked while compiling, predicate or not)."""
    everyone = expr.ctas(case.grid, case.cluster)
    return everyone if literal else [cta for cta in everyone if predicate_holds(case, cta)]


def _breaks_at_run_time(case: Case, start: expr.Expr, bad, reason: str) -> None:
    """Raise if `start` is `bad` in some CTA: while compiling for a literal, else at run time."""
    if not expr.is_traced(start):
        if bad(start.value):
            raise UserError(reason.format(start.value))
        return
    for cta in _ctas(case):
        value = expr.evaluate(start, cta)
        if bad(value):
            raise UserError(reason.format(value) + f" (CTA {cta.program_id})", compile_time=False)


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


def _check_common(case: Case, dims: tuple[Dim, ...]) -> None:
    if case.partition and case.arch != "sm_100a":
        raise UserError("partitioned/replicated collective loads need arch='sm_100a'")
    if case.direction == "store" and case.collective:
        raise UserError("stores cannot be collective")
    if case.swizzle not in SWIZZLES:
        raise UserError(f"swizzle {case.swizzle} is not 0, 32, 64 or 128")
    if case.reduction and not reduction_allowed(case.reduction, case.element):
        raise UserError(f"reduction {case.reduction!r} does not take {case.dtype}")
    if case.slots and not expr.is_traced(case.slot) and not 0 <= case.slot.value < case.slots:
        raise UserError(f"buffer slot {case.slot.value} out of range")
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
    if minor.squeezed:
        raise UserError("4-bit copies must take a window of the minor dim, not index it")
    if minor.size % 2:
        raise UserError("4-bit minor window of odd size")
    _breaks_at_run_time(case, minor.start, lambda v: v % 2, "4-bit minor window starting at odd {}")
    rank = len(window_shape(dims))
    for transform in case.transforms:
        if isinstance(transform, Transpose):
            if transform.permutation[-1] != rank - 1:
                raise UserError("a transpose moves the minor dim of 4-bit elements")
        else:
            if transform.tiling[-1] % 2:
                raise UserError("odd innermost tile of 4-bit elements")
            rank += len(transform.tiling)


def _tiling_cuts(case: Case, dims: tuple[Dim, ...]) -> dict[int, int]:
    """GMEM dims a rounding-down tiling cuts (dim -> kept size); raises for tilings that do
    not fit the array or start off a tile boundary (TMA only)."""
    cut = {}
    labels = window_gmem_dims(dims)
    for gmem_dim, tile, round_down in tiled_dims(case.transforms, labels):
        size = case.gmem_shape[gmem_dim]
        if size > tile and size % tile:
            if not round_down:
                raise UserError(f"GMEM dim {gmem_dim} of {size} is no multiple of its tile {tile}")
            cut[gmem_dim] = size // tile * tile
        _breaks_at_run_time(
            case, dims[gmem_dim].start, lambda v, t=tile: v % t,
            f"start {{}} along dim {gmem_dim} is not on a boundary of its tile {tile}",
        )
    return cut


def _check_tma(case: Case, dims: tuple[Dim, ...]) -> None:
    element = case.element
    shape = list(case.smem_shape)
    inner_bytes = byte_size(shape[-1:], element)
    if element.packed:
        shape[-1] //= 2  # a box of bytes
    if not case.collective and max(shape) > MAX_BOX:
        raise UserError(f"TMA box {tuple(shape)} over {MAX_BOX}")
    # A minor dim of 1 may be dropped as a unit dim, leaving another dim minor: no verdict then.
    if case.smem_shape[-1] > 1 and inner_bytes % 16:
        raise UserError(f"minor box dim of {inner_bytes} bytes")
    if case.smem_shape[-1] > 1 and swizzle_bytes(case) and inner_bytes != case.swizzle:
        raise UserError(f"swizzle {case.swizzle} with a minor dim of {inner_bytes} bytes")
    if case.direction == "store":
        for dim in dims:
            if not dim.squeezed and not dim.traced and dim.start.value < 0:
                raise UserError(f"store window at literal negative start {dim.start.value}")
    _check_minor_coordinate(case, dims)
    for dim in dims:
        if not dim.traced and not -(1 << 31) <= dim.start.value < 1 << 31:
            raise UserError(f"start {dim.start.value} does not fit the signed 32-bit coordinates of TMA")


def _check_minor_coordinate(case: Case, dims: tuple[Dim, ...]) -> None:
    """The box's minor coordinate must fall on a 16-byte boundary of the row: the H200 faults
    (CUDA_ERROR_ILLEGAL_INSTRUCTION) on loads and stores that start elsewhere.  Under a tiling of
    the minor dim that coordinate is the offset inside a tile, 0 for a tile-aligned start."""
    minor = len(dims) - 1
    tiled = {d for d, _, _ in tiled_dims(case.transforms, window_gmem_dims(dims))}
    if case.gmem_shape[minor] == 1 or dims[minor].squeezed or minor in tiled:
        return
    bits = case.element.bits
    _breaks_at_run_time(
        case, dims[minor].start, lambda v: v * bits % 128,
        "minor window start {} is not on a 16-byte boundary (TMA faults there)",
    )


def _out_of_bounds(case: Case, dims: tuple[Dim, ...], cta: expr.Cta) -> bool:
    for dim, size in zip(dims, case.gmem_shape):
        start = expr.evaluate(dim.start, cta)
        if start < 0 or start + dim.extent > size:
            return True
    return False


def _check_in_bounds(case: Case, dims: tuple[Dim, ...], what: str) -> None:
    literal = all(not d.traced for d in dims)
    for cta in _ctas(case, literal):
        if _out_of_bounds(case, dims, cta):
            raise UserError(f"{what} leaves the array", compile_time=literal)


def _check_bulk(case: Case, dims: tuple[Dim, ...]) -> None:
    if case.element.packed:
        raise UserError("bulk copies of 4-bit elements")
    transfer = byte_size(case.smem_shape, case.element)
    if transfer % 16:
        raise UserError(f"bulk copy of {transfer} bytes")
    literal = all(expr.static_value(d.start) is not None for d in dims)  # as the frontend sees them
    total = byte_size(case.gmem_shape, case.element)
    if case.oob == "promise_in_bounds":
        _check_in_bounds(case, dims, "a bulk copy promised in bounds")
    elif not literal and total % 16:
        raise UserError(f"oob='undefined' bulk copy with traced starts on an array of {total} bytes")
    for cta in _ctas(case, literal):
        offset, moved = bulk_moved(case, dims, cta)
        if moved and offset % 16 or (literal and flat_run(case, dims, cta) % 16):
            raise UserError(f"bulk copy at byte offset {offset}", compile_time=literal)
        if moved % 16:
            raise UserError(f"bulk copy clamped to {moved} bytes", compile_time=literal)


def _check_cp_async(case: Case, dims: tuple[Dim, ...]) -> None:
    if case.element.packed:
        raise UserError("cp.async copies of 4-bit elements")
    if case.direction == "store" or case.collective or case.predicate is not None or case.oob == "undefined":
        raise UserError("cp.async copies are unpredicated, non-collective loads without oob='undefined'")
    _check_in_bounds(case, dims, "a cp.async copy")
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
        row = tile.tiling[1] if tile else shape[1]
        if swizzle_bytes(case) and row * case.element.numpy.itemsize != case.swizzle:
            raise UserError("cp.async swizzle with rows of another width")


def check_compile_only(case: Case, dims: tuple[Dim, ...]) -> None:
    """The TMA rules, for a tensor copy too large to run (`engine` would build its arrays)."""
    _check_tma(case, dims)


def check(case: Case, dims: tuple[Dim, ...], chosen: str) -> dict[int, int]:
    """Raise UserError if the case breaks a rule; returns the GMEM dims rounding cuts short."""
    _check_common(case, dims)
    _check_hints(case, dims)
    if case.element.packed:
        _check_packed(case, dims)
    if chosen == "tma":
        cut = _tiling_cuts(case, dims)
        _check_tma(case, dims)
        return cut
    if chosen == "bulk":
        _check_bulk(case, dims)
    else:
        _check_cp_async(case, dims)
    return {}


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
        if not expr.obviously_multiple(dims[gmem_dim].start, tile):
            return None
    if case.element.packed and not expr.obviously_multiple(dims[-1].start, 2):
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
    if not _static_starts(dims):
        return None
    return "a bulk copy of whole, aligned 16-byte units"


def _cp_async_certain(case: Case, dims: tuple[Dim, ...]) -> str | None:
    if not _static_starts(dims) or len(case.gmem_shape) != 2 or any(d.squeezed for d in dims):
        return None
    item = case.element.numpy.itemsize
    rows, cols = window_shape(dims)
    row_bytes = (case.transforms[0].tiling[1] if case.transforms else cols) * item
    offset = (dims[0].start.value * case.gmem_shape[1] + dims[1].start.value) * item
    needs = (row_bytes, case.gmem_shape[1] * item if rows > 1 else 0, offset, cols * item)
    if any(n % 4 for n in needs):
        return None
    return "an in-bounds cp.async copy of 4-byte aligned rows"
