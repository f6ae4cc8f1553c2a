"""Where a GMEM window lies in its array's bytes: the addressing of copies without a tensor map.

Bulk copies (`cp.async.bulk`) and the cp.async fallback address a kernel argument as what it is,
a dense row-major buffer: the window `x.at[...]` starts at the byte offset of its first element,
`sum(start[d] * byte_stride[d])`, and each copy moves runs of consecutive bytes from there.

A window is described as the copy ops carry it: one start per dim of the array (an int, or a
traced index the transform algebra can multiply) and one size per dim, -1 marking a squeezed
(integer-indexed) dim.
"""

from __future__ import annotations

from collections.abc import Sequence

from asyncdsl.dtypes import DType
from asyncdsl.hw.transforms import Index, linear_combination

SQUEEZED = -1


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a row-major array of `shape`."""
    strides = []
    stride = 1
    for size in reversed(shape):
        strides.append(stride)
        stride *= size
    return tuple(reversed(strides))


def byte_strides(shape: Sequence[int], dtype: DType) -> tuple[int, ...]:
    """Byte strides of a dense row-major array of `shape` (whole-byte element types)."""
    return tuple(stride * dtype.itemsize for stride in contiguous_strides(shape))


def array_bytes(shape: Sequence[int], dtype: DType) -> int:
    count = 1
    for size in shape:
        count *= size
    return count * dtype.itemsize


def start_offset_bytes(shape: Sequence[int], dtype: DType, starts: Sequence[Index]) -> Index:
    """The byte offset of the window's first element: an int, or traced when a start is."""
    return linear_combination(tuple(starts), byte_strides(shape, dtype))


def static_offset_bytes(shape: Sequence[int], dtype: DType, starts: Sequence[Index]) -> int:
    """The part of the first element's byte offset that the static starts contribute."""
    return sum(
        start * stride for start, stride in zip(starts, byte_strides(shape, dtype)) if type(start) is int
    )


def traced_strides(shape: Sequence[int], dtype: DType, starts: Sequence[Index]) -> tuple[int, ...]:
    """Byte strides of the dims whose starts are traced (their alignment is assumed, not known)."""
    return tuple(
        stride for start, stride in zip(starts, byte_strides(shape, dtype)) if type(start) is not int
    )


def sliced_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    """The window's shape with squeezed dims removed: the shape transforms apply to."""
    return tuple(size for size in sizes if size != SQUEEZED)


def strided_rows(shape: Sequence[int], sizes: Sequence[int]) -> tuple[int, int, int] | None:
    """The window as `(rows, row_elements, row_stride)`: rows of consecutive elements, each
    `row_stride` elements after the previous, or None when one stride cannot describe it.

    Trailing dims merge into the row while they are contiguous (a dim the window spans in full
    continues the one before it); the dims left must merge the same way into the rows.
    """
    strides = contiguous_strides(shape)
    dims = [(size, stride) for size, stride in zip(sizes, strides) if size not in (SQUEEZED, 1)]
    row_elements = 1
    while dims and dims[-1][1] == row_elements:
        row_elements *= dims.pop()[0]
    if not dims:
        return 1, row_elements, row_elements
    rows, row_stride = dims.pop()
    while dims and dims[-1][1] == rows * row_stride:
        rows *= dims.pop()[0]
    if dims:
        return None
    return rows, row_elements, row_stride


def out_of_bounds_dims(shape: Sequence[int], starts: Sequence[Index], sizes: Sequence[int]) -> list[str]:
    """What of a window lies outside the array along dims with static starts, one phrase per
    offending dim (traced starts cannot be checked while compiling)."""
    problems = []
    for dim, (extent, start, size) in enumerate(zip(shape, starts, sizes)):
        if type(start) is not int:
            continue
        if size == SQUEEZED:
            if not 0 <= start < extent:
                problems.append(f"index {start} along dim {dim} of size {extent}")
        elif start < 0 or start + size > extent:
            problems.append(f"window [{start}, {start + size}) along dim {dim} of size {extent}")
    return problems
