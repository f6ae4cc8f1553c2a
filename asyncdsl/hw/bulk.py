"""Planning a contiguous bulk copy: one `cp.async.bulk` of consecutive GMEM bytes, no tensor map.

The reference copy engine takes this road when the caller gave up zero fill (`oob` is
"undefined" or "promise_in_bounds") and nothing needs a tensor map: no swizzle, reduction or
collective, and the SMEM buffer, filled densely with the transformed slice, holds consecutive
elements of the GMEM array.  Then the whole copy is one run of bytes from the slice's first
element, of any length (no 256-element box limit, any rank).

Hardware rules (docs/hardware.md §8): the byte count is a multiple of 16 and both addresses
are 16-byte aligned.  Static starts are checked here; a traced start is assumed to keep the GMEM
address 16-byte aligned (the interpreter checks the address it computes; the GPU would fault).

Out of bounds: "promise_in_bounds" moves the whole run (the interpreter reports a broken
promise).  "undefined" clamps the byte count to what is left of the array after the run's start
(nothing for a start before the array or past its end) and completes the barrier for the missing
bytes, so a wait does not hang; the SMEM bytes past the clamp are left as they were.  A load's
window elements outside the array are undefined (the run may hold other elements there).  A store
must not write outside its window, so under "undefined" it is allowed only where the clamped run
lies in the window's part inside the array (`clamped_store_stays_in_window`): a window out of
bounds along an inner dim, or past the end of a dim where the array goes on, would overwrite other
elements; such a static window is refused, a traced one checked at run time (the store skipped).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from asyncdsl.dtypes import DType
from asyncdsl.errors import CopyError, TransformError
from asyncdsl.hw import gmem_runs
from asyncdsl.hw.limits import BULK_ALIGNMENT
from asyncdsl.hw.options import Oob
from asyncdsl.hw.transforms import Index, MemRefTransform, linear_combination


def is_contiguous_run(
    gmem_shape: Sequence[int],
    sizes: Sequence[int],
    transforms: Sequence[MemRefTransform],
    smem_shape: Sequence[int],
) -> bool:
    """Whether the SMEM buffer, filled densely with `transforms(window)`, holds consecutive
    elements of the array (False as well when the transformed window is not the buffer's shape:
    the tensor path then reports that).

    Decided on shapes and strides alone (the window is a strided view of the array, and so is
    every transform of it), so a window of any size costs the same."""
    shape = gmem_runs.sliced_sizes(sizes)
    strides = tuple(
        stride for stride, size in zip(gmem_runs.contiguous_strides(gmem_shape), sizes)
        if size != gmem_runs.SQUEEZED
    )
    try:
        for transform in transforms:
            shape, strides = transform.transform_shape(shape), transform.transform_strides(strides)
    except TransformError:
        return False
    if shape != tuple(smem_shape):
        return False
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def clamped_bytes(offset_bytes: int, transfer_bytes: int, array_bytes: int) -> int:
    """Bytes an "undefined" bulk copy moves from `offset_bytes`: what the array has left there,
    at most the whole transfer, nothing for an offset outside the array."""
    if not 0 <= offset_bytes < array_bytes:
        return 0
    return min(transfer_bytes, array_bytes - offset_bytes)


class StaticLogic:
    """The comparisons `clamped_store_stays_in_window` makes, on ints (the resolver's own version
    emits them as IR for traced starts).  `index_bits`: how wide the index arithmetic that
    computes offsets is (None: Python's unbounded ints)."""

    COMPARE = {"<": operator.lt, "<=": operator.le, ">=": operator.ge, "==": operator.eq}
    index_bits: int | None = None

    def compare(self, index: int, relation: str, bound: int) -> bool:
        return self.COMPARE[relation](index, bound)

    def all(self, conditions: Sequence[bool]) -> bool:
        return all(conditions)

    def any(self, conditions: Sequence[bool]) -> bool:
        return any(conditions)


def clamped_store_stays_in_window(
    gmem_shape: Sequence[int], starts: Sequence[Index], sizes: Sequence[int], logic=StaticLogic()
):
    """Whether an oob="undefined" bulk store of a contiguous-run window writes only elements of its
    window: what the run clamped at the array's end (`clamped_bytes`) writes must lie in the window's
    part inside the array.

    The run holds the window's elements in order from `offset = sum(start[d] * stride[d])` of the
    flat array, and the clamp keeps those before the array's end (nothing for an offset outside
    the array).  So the store stays in its window when the offset lies outside the array, or when
    every dim starts inside the array and the window runs past a dim's end only where all the
    dims before it start at their last index (what lies past is then past the array's end).

    `starts` are ints or traced values, `sizes` -1 for squeezed dims; `logic` makes the comparisons
    (`StaticLogic` for ints: returns a bool).  Offsets computed in `logic.index_bits`-bit index
    arithmetic are compared only for an array of fewer elements than that range: its wrapped
    value is then exact wherever the window starts inside the array, so the verdict never lets a
    store out of its window (for larger arrays a window outside the array is refused even where
    it would write nothing).
    """
    widths = [1 if size == gmem_runs.SQUEEZED else size for size in sizes]
    inside = []
    for dim, (start, width, extent) in enumerate(zip(starts, widths, gmem_shape)):
        inside += [logic.compare(start, ">=", 0), logic.compare(start, "<", extent)]
        if type(start) is int and start + width <= extent:
            continue
        last_run = logic.all([logic.compare(starts[d], "==", gmem_shape[d] - 1) for d in range(dim)])
        inside.append(logic.any([logic.compare(start, "<=", extent - width), last_run]))
    total = math.prod(gmem_shape)
    nothing_written = []
    if logic.index_bits is None or total < 1 << (logic.index_bits - 1):
        offset = linear_combination(tuple(starts), gmem_runs.contiguous_strides(gmem_shape))
        nothing_written = [logic.compare(offset, "<", 0), logic.compare(offset, ">=", total)]
    return logic.any([*nothing_written, logic.all(inside)])


def check_bulk_copy(
    gmem_shape: Sequence[int],
    dtype: DType,
    starts: Sequence[Index],
    sizes: Sequence[int],
    smem_shape: Sequence[int],
    oob: Oob,
    store: bool = False,
) -> None:
    """Check a window that `is_contiguous_run` accepted against the bulk-copy rules.

    `starts` are ints or traced values, `sizes` -1 for squeezed dims.  (The SMEM address needs
    no check: a buffer or view of a multiple of 16 bytes is 16-byte aligned, since allocations
    are and views step by whole sub-buffers.)  Raises CopyError naming the broken rule.
    """
    if dtype.bits < 8:
        raise CopyError(f"bulk copies of {dtype.bits}-bit elements ({dtype}) are not supported")
    transfer = int(np.prod(smem_shape, dtype=np.int64)) * dtype.itemsize
    if transfer % BULK_ALIGNMENT:
        raise CopyError(
            f"a bulk copy moves a multiple of {BULK_ALIGNMENT} bytes; this slice is {transfer} bytes"
        )
    static = gmem_runs.static_offset_bytes(gmem_shape, dtype, starts)
    if not -(1 << 63) <= static < 1 << 63:
        raise CopyError(
            f"the slice starts {static} bytes into the array, beyond the 64-bit addresses of a bulk copy"
        )
    if static % BULK_ALIGNMENT:
        raise CopyError(
            f"a bulk copy needs a {BULK_ALIGNMENT}-byte aligned GMEM address; the slice starts "
            f"{static} bytes into the array"
        )
    total = gmem_runs.array_bytes(gmem_shape, dtype)
    traced = bool(gmem_runs.traced_strides(gmem_shape, dtype, starts))
    if oob == Oob.UNDEFINED and not traced:
        moved = clamped_bytes(static, transfer, total)
        if moved % BULK_ALIGNMENT:
            raise CopyError(
                f"the slice runs past the end of the {total}-byte array, and the {moved} bytes "
                f"left are not a multiple of {BULK_ALIGNMENT}, as a bulk copy needs"
            )
    if (oob == Oob.UNDEFINED and store and not traced
            and not clamped_store_stays_in_window(gmem_shape, starts, sizes)):
        raise CopyError(
            "oob='undefined' clamps a bulk store at the end of the array, but this slice leaves the array "
            "elsewhere (" + "; ".join(gmem_runs.out_of_bounds_dims(gmem_shape, starts, sizes)) + "): its run "
            "of bytes would overwrite elements outside the slice; keep the slice inside the array, or let it "
            "run past the array's end only"
        )
    if oob == Oob.UNDEFINED and traced and total % BULK_ALIGNMENT:
        raise CopyError(
            f"oob='undefined' clamps a bulk copy at the end of the array, whose {total} bytes "
            f"are not a multiple of {BULK_ALIGNMENT}: a clamped copy could not move a multiple of "
            f"{BULK_ALIGNMENT}"
        )
    if oob == Oob.PROMISE_IN_BOUNDS:
        problems = gmem_runs.out_of_bounds_dims(gmem_shape, starts, sizes)
        if problems:
            raise CopyError(
                "oob='promise_in_bounds' but the slice leaves the array: " + "; ".join(problems)
            )
