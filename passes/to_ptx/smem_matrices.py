"""16-bit register tiles moved to and from shared memory as 8×8 matrices (`stmatrix`, `ldmatrix`).

`stmatrix.sync.aligned.m8n8.x{1,2,4}.shared.b16` stores up to four 8×8 matrices of 16-bit
elements for a warp in one instruction (PTX ISA, *Warp Level Matrix Store Instruction*), and
`ldmatrix` loads them: lane l holds, as one 32-bit register per matrix, the two elements at row
l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of each matrix, and lane l gives the address of row
l % 8 of matrix l / 8 (each row 16 contiguous bytes).  A register tile's 4-byte pieces
(`smem_addresses.AccessPlan`) are such matrices when in every warp the four threads 4r .. 4r + 3
hold the four consecutive words of one 16-byte row, for r = 0 .. 7: the wgmma fragment layouts
do, the accumulator's and the A operand's.  One instruction then does what four `st.shared.b32`
or `ld.shared.b32` did, at the rows' addresses: lane l's is piece m's address in thread
4 (l % 8) of its warp, m the matrix it names, computed like any piece's address (a thread term
linear in l's bits, the swizzle as `smem_addresses` applies it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asyncdsl.hw.tiling import THREADS
from asyncdsl.passes.to_ptx.smem_addresses import AccessPlan, AddressMode, LaneAddresses, unswizzled_offsets

WARP = 32
ROW_BYTES = 16  # one row of an 8×8 matrix of 16-bit elements
WORD = 4


@dataclass(frozen=True)
class MatrixAccess:
    """One instruction: the plan's pieces it moves (matrix i is piece `pieces[i]`) and the index
    of its lanes' address in `MatrixPlan.addresses`."""

    pieces: tuple[int, ...]
    address: int


@dataclass(frozen=True)
class MatrixPlan:
    accesses: list[MatrixAccess]
    addresses: LaneAddresses


def _rows_are_matrices(addresses: np.ndarray) -> bool:
    """Whether every piece is an 8×8 matrix: in each warp, threads 4r .. 4r + 3 hold the words of
    one 16-byte aligned row, in order (`addresses`: thread × piece, relative to an aligned base)."""
    by_warp = addresses.reshape(THREADS // WARP, 8, 4, -1)  # warp, row, word in the row, piece
    rows = by_warp[:, :, :1, :]
    return bool((by_warp == rows + WORD * np.arange(4)[None, None, :, None]).all()
                and (rows % ROW_BYTES == 0).all())


def matrix_plan(plan: AccessPlan, element_bytes: int, replicated: bool,
                base_alignment: int) -> MatrixPlan | None:
    """The stmatrix/ldmatrix form of `plan`'s accesses, or None where it does not apply: elements
    that are not 16-bit, pieces that are not single words of 8×8 matrices, replicated layouts
    (a store writes each element once), or addresses swizzled per access at run time."""
    if element_bytes != 2 or plan.piece_bytes != WORD or replicated or plan.mode is AddressMode.RUNTIME:
        return None
    if base_alignment % ROW_BYTES:
        return None
    count = len(plan.pieces)
    if not _rows_are_matrices(plan.addresses(0)):
        return None
    unswizzled = unswizzled_offsets(plan)
    lanes = np.arange(THREADS)
    row_holder = (lanes & ~(WARP - 1)) | ((lanes & 7) << 2)  # thread 4 (l % 8) of l's warp
    groups, start = [], 0
    while start < count:
        size = next(n for n in (4, 2, 1) if start + n <= count)
        groups.append(tuple(range(start, start + size)))
        start += size
    # Lane l's address for group g: matrix (l / 8) mod |g|, whose row l % 8 thread 4 (l % 8) holds.
    # One thread term must serve every group (their matrices spaced alike), else no extra registers.
    lane_term, accesses, constants = None, [], []
    for group in groups:
        matrix = (lanes >> 3) % len(group)
        linear = unswizzled[row_holder, np.array(group)[matrix]]
        if lane_term is None:
            lane_term = linear - linear[0]
        elif not (linear - linear[0] == lane_term).all():
            return None
        constants.append(int(linear[0]))
        accesses.append(MatrixAccess(group, len(constants) - 1))
    assert lane_term is not None, "a plan has a piece (piece 0's rows were checked above)"
    addresses = LaneAddresses(lane_term, constants, plan.swizzle, base_alignment, "a matrix row's address")
    if addresses.mode is AddressMode.RUNTIME:
        return None
    return MatrixPlan(accesses, addresses)
