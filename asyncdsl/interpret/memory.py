"""Global and shared memory of an interpreted launch, and the references kernel code holds.

GMEM is the caller's numpy arrays themselves, seen as flat byte buffers: TMA descriptors view
the bytes of their argument from its base, and stores write through to the caller's array, so
bytes no copy touches stay as they were.  SMEM is one zeroed byte buffer per CTA of exactly the
size `allocate-smem` planned (`asyncdsl.smem_bytes`); every access is checked against it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import MemRefType

from asyncdsl import dtypes
from asyncdsl.errors import ArgumentError, InterpretError, OutOfBoundsError
from asyncdsl.hw.limits import BARRIER_BYTES


@dataclass(frozen=True)
class GlobalArgument:
    """One array argument of the kernel: its name and its bytes (a view of the caller's array)."""

    name: str
    array: np.ndarray

    @property
    def raw(self) -> np.ndarray:
        return self.array.reshape(-1).view(np.uint8)

    def writable(self, what: str) -> np.ndarray:
        """`raw`, for `what` (an op that writes the argument) to write: refused where the
        caller's numpy array is read-only (`np.frombuffer`, a memmap opened "r"), which numpy
        would refuse from deep inside the interpreter."""
        if not self.array.flags.writeable:
            raise ArgumentError(f"{what} to argument {self.name!r}, whose numpy array is read-only")
        return self.raw


class SharedMemory:
    """The shared memory of one CTA: `size` bytes from the CTA's 1024-aligned base."""

    def __init__(self, size: int):
        self.size = size
        # Unwritten SMEM holds garbage on the GPU: here, bytes that read as NaN in every float type
        # and -1 in every signed int, so a read before any write shows (zeros often look right).
        self.bytes = np.full(size, 0xFF, np.uint8)

    def check(self, start: int, length: int, what: str) -> None:
        """Raise OutOfBoundsError unless bytes [start, start + length) are inside this SMEM."""
        if start < 0 or start + length > self.size:
            raise OutOfBoundsError(
                f"{what} touches shared memory bytes [{start}, {start + length}), outside the "
                f"{self.size} bytes the kernel planned (asyncdsl.smem_bytes)"
            )


@dataclass(frozen=True)
class SmemBuffer:
    """An SMEM buffer or view as kernel code holds it: where it starts and what it holds.

    Packed sub-byte elements share bytes, so such a buffer is held as the bytes of its rows:
    `shape` counts bytes along the last dim (`of_type` makes one from an IR memref type).
    """

    offset: int
    shape: tuple[int, ...]
    element_bytes: int
    origin: str  # the source line of the allocation, for messages

    @staticmethod
    def of_type(offset: int, memref: MemRefType, origin: str) -> SmemBuffer:
        element = dtypes.from_mlir(memref.element_type)
        shape = tuple(memref.get_shape())
        if element.bits < 8:
            shape = (*shape[:-1], -(-shape[-1] * element.bits // 8))
        return SmemBuffer(offset, shape, element.itemsize, origin)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.element_bytes

    def view(self, indices: tuple[int, ...]) -> SmemBuffer:
        """The sub-buffer at `indices` along the leading dims (as `smem_view` addresses it)."""
        offset = self.offset
        stride = self.nbytes
        for dim, index in enumerate(indices):
            size = self.shape[dim]
            stride //= size
            if not 0 <= index < size:
                raise OutOfBoundsError(
                    f"index {index} along dim {dim} of the shared-memory buffer of shape "
                    f"{self.shape} allocated at {self.origin} (valid: 0 .. {size - 1}): on the GPU "
                    "the view would overlap other shared memory"
                )
            offset += index * stride
        return SmemBuffer(offset, self.shape[len(indices):], self.element_bytes, self.origin)

    def window(self, start: int, size: int, dim: int, extent: int, step: int,
               memref: MemRefType) -> SmemBuffer:
        """Indices [start, start + size) of the `extent` logical indices of `dim`, the leading
        dim (rows) or the last (columns), as `smem_window` addresses them (`memref` the window's
        type), `start` a multiple of `step`."""
        what = "rows" if dim == 0 else "columns"
        if not 0 <= start <= extent - size:
            raise OutOfBoundsError(
                f"the window of {what} {start} .. {start + size - 1} of the shared-memory buffer of "
                f"{extent} {what} allocated at {self.origin} (valid starts: 0 .. {extent - size}): "
                "on the GPU it would overlap other shared memory"
            )
        if start % step:
            raise InterpretError(
                f"the window starting at {what[:-1]} {start} of the shared-memory buffer allocated at "
                f"{self.origin} must start at a multiple of {step} {what} (whole tiles of its layout, "
                f"a whole swizzle atom): on the GPU its {what} would be read in another layout"
            )
        return SmemBuffer.of_type(self.offset + start * (self.nbytes // extent), memref, self.origin)


@dataclass(frozen=True)
class BarrierGroup:
    """A group of `count` mbarriers at `offset`, as kernel code holds it."""

    offset: int
    count: int
    origin: str

    def address(self, index: int) -> int:
        """The SMEM offset of barrier `index` of the group."""
        if not 0 <= index < self.count:
            raise OutOfBoundsError(
                f"barrier index {index} is outside the group of {self.count} barrier(s) "
                f"allocated at {self.origin}: on the GPU it would address other shared memory"
            )
        return self.offset + BARRIER_BYTES * index
