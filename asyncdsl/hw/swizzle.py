"""The shared-memory swizzle of TMA (and of cp.async, ldmatrix and wgmma reading the same bytes).

A swizzle of `S` bytes (32, 64 or 128) moves each 16-byte chunk of shared memory by XOR-ing bits
4.. of its absolute address with bits 7..: `A ^ (((A >> 7) & (S/16 - 1)) << 4)`.  Rows of a
swizzled box are padded to `S` bytes, and the pattern repeats every 8 rows of `S` bytes, which
is why swizzled buffers are aligned to that repeat (docs/hardware.md §4.1–§4.2).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from asyncdsl.hw.limits import SWIZZLE_CHUNK

Address = TypeVar("Address", int, np.ndarray)  # an int, or a numpy integer array of addresses


def swizzled(address: Address, swizzle_bytes: int) -> Address:
    """Where the swizzle of `swizzle_bytes` (0: none) moves the byte at absolute shared `address`."""
    if not swizzle_bytes:
        return address
    return address ^ (((address >> 7) & (swizzle_bytes // SWIZZLE_CHUNK - 1)) << 4)


def repeat_bytes(swizzle_bytes: int) -> int:
    """Bytes after which the pattern repeats: 8 rows of the swizzle span (a buffer swizzled with
    `swizzle_bytes` is aligned to this so its pattern starts at its first row)."""
    return 8 * swizzle_bytes
