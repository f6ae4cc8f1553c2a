"""Where each thread's register vectors of a tile lie in a shared-memory buffer, and the PTX
that computes those addresses.

A buffer holds its tile through its layout (`hw.smem_layout`; row-major when it has none): the
logical element a thread's register lane holds sits at a physical element offset, and its bytes
at the swizzle of their absolute address.  A register's vector moves in aligned pieces of up to
16 bytes whose lanes are physically adjacent; an aligned piece of at most 16 bytes lies inside
one 16-byte chunk, the unit the swizzle moves, so each piece has one swizzled address.

The linear part of piece p's address in thread t is `base + T(t) + S(p)`: the thread term T is
linear in t's bits (one PTX sequence for all 128 threads) and S a constant.  The swizzle
`A ^ (((A >> 7) & m) << 4)` is then applied in one of three ways (`AddressMode`):

- LINEAR (no swizzle): `[base + T + S]`, S an immediate offset.
- XOR (a base aligned to the swizzle's repeat): the swizzle is XOR-linear on the offset from
  such a base, so `swz(T + S) = (swz(T) ^ X) + R`, where X is the part of swz(S) on bits the
  thread part may set and R the rest; swz(T) is computed once, one XOR and one add per distinct
  X, and R is an immediate.  The decomposition is checked for every thread and piece.
- RUNTIME (otherwise): each piece's absolute address is computed and swizzled in PTX.

`AccessPlan.addresses` evaluates exactly what the emitted PTX computes, so tests compare it with
the layout's own mapping for every thread and register.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
from xdsl.ir import SSAValue

from asyncdsl.hw.fragments import Layout
from asyncdsl.hw.limits import SWIZZLE_CHUNK
from asyncdsl.hw.smem_layout import SmemLayout
from asyncdsl.hw.swizzle import repeat_bytes, swizzled
from asyncdsl.hw.tiling import THREADS
from asyncdsl.passes.to_ptx.context import KernelLowering
from asyncdsl.passes.to_ptx.tile_registers import thread_coefficients, thread_term, uniform

MAX_ACCESS_BYTES = 16


class AddressMode(enum.Enum):
    LINEAR = "linear"
    XOR = "xor"
    RUNTIME = "runtime"


@dataclass(frozen=True)
class Piece:
    """One access of a thread: `lanes` vector lanes from `lane` of register slot `slot`,
    at linear byte offset `offset` past the thread term."""

    slot: int
    lane: int
    lanes: int
    offset: int


class AccessPlan:
    """The accesses of every thread to a `shape` tile in register `layout`, in a buffer of
    `buffer_layout` whose base address is a multiple of `base_alignment`."""

    def __init__(self, layout: Layout, shape: tuple[int, ...], element_bytes: int,
                 buffer_layout: SmemLayout, base_alignment: int):
        coordinates = layout.coordinates(shape)  # (128, *registers, vector lane, rank)
        self.vector = layout.vector_length
        offsets = buffer_layout.element_offsets(np.moveaxis(coordinates, -1, 0)).reshape(
            THREADS, -1, self.vector)
        self.element_bytes = element_bytes
        self.swizzle = buffer_layout.swizzle_bytes
        self.piece_bytes = _piece_bytes(offsets * element_bytes, element_bytes, base_alignment)
        lanes = self.piece_bytes // element_bytes
        starts = offsets[:, :, ::lanes].reshape(THREADS, -1) * element_bytes  # (threads, pieces)
        per_thread = starts[:, 0] - starts[0, 0]
        self.coefficients = thread_coefficients(per_thread, f"the address of a tile in layout {layout}")
        self.thread_offsets = per_thread
        constants = uniform(starts - per_thread[:, None], "a register's address in a tile")
        self.pieces = [
            Piece(index // (self.vector // lanes), index % (self.vector // lanes) * lanes, lanes, int(offset))
            for index, offset in enumerate(constants)
        ]
        self.mode, self.split = address_mode(self.thread_offsets, [p.offset for p in self.pieces],
                                             self.swizzle, base_alignment)

    def addresses(self, base: int) -> np.ndarray:
        """The address PTX computes for each thread (row) and piece (column), the buffer at `base`."""
        return planned_addresses(self, base)


class LaneAddresses:
    """Addresses `base + thread_offsets[t] + constants[i]` (swizzled when the buffer is), one per
    constant, computed like an `AccessPlan`'s pieces: what `piece_addresses` emits for them."""

    def __init__(self, thread_offsets: np.ndarray, constants: list[int], swizzle: int,
                 base_alignment: int, what: str):
        offsets = np.asarray(thread_offsets, dtype=np.int64)
        shift = int(offsets[0])  # thread 0's part goes into the constants, as in `AccessPlan`
        self.thread_offsets = offsets - shift
        self.coefficients = thread_coefficients(self.thread_offsets, what)
        self.pieces = [Piece(-1, 0, 0, int(c) + shift) for c in constants]
        self.swizzle = swizzle
        self.mode, self.split = address_mode(self.thread_offsets, [p.offset for p in self.pieces], swizzle,
                                             base_alignment)

    def addresses(self, base: int) -> np.ndarray:
        """The address PTX computes for each thread (row) and constant (column), the buffer at `base`."""
        return planned_addresses(self, base)


def address_mode(thread_offsets: np.ndarray, constants: list[int], swizzle: int,
                 base_alignment: int) -> tuple[AddressMode, list[tuple[int, int]]]:
    """The address mode of accesses at `thread_offsets[t] + constants[i]`, and for XOR the
    (X, R) pair of each constant."""
    if not swizzle:
        return AddressMode.LINEAR, []
    if base_alignment % repeat_bytes(swizzle):
        return AddressMode.RUNTIME, []
    thread_part = swizzled(thread_offsets, swizzle)
    thread_bits = int(np.bitwise_or.reduce(thread_part))
    split = []
    for constant in constants:
        moved = int(swizzled(constant, swizzle))
        split.append((moved & thread_bits, moved & ~thread_bits))
    for constant, (xor, rest) in zip(constants, split):
        if not ((thread_part ^ xor) + rest == swizzled(thread_offsets + constant, swizzle)).all():
            return AddressMode.RUNTIME, []
    return AddressMode.XOR, split


def unswizzled_offsets(plan: AccessPlan | LaneAddresses) -> np.ndarray:
    """Every thread's (row) offset of every access (column) of `plan` before the swizzle."""
    threads = plan.thread_offsets.astype(np.int64)[:, None]
    return threads + np.array([piece.offset for piece in plan.pieces], dtype=np.int64)[None, :]


def planned_addresses(plan: AccessPlan | LaneAddresses, base: int) -> np.ndarray:
    """What PTX computes for every thread (row) and access (column) of `plan` with the buffer at
    `base`, in its address mode."""
    if plan.mode is AddressMode.LINEAR:
        return base + unswizzled_offsets(plan)
    if plan.mode is AddressMode.XOR:
        xor, rest = (np.array(part, dtype=np.int64)[None, :] for part in zip(*plan.split))
        return base + ((swizzled(plan.thread_offsets.astype(np.int64)[:, None], plan.swizzle) ^ xor) + rest)
    return swizzled(base + unswizzled_offsets(plan), plan.swizzle)


def _piece_bytes(byte_offsets: np.ndarray, element_bytes: int, base_alignment: int) -> int:
    """The widest access (a power of two, at most 16 bytes) every register vector splits into:
    physically adjacent lanes, aligned in every thread."""
    vector_bytes = byte_offsets.shape[-1] * element_bytes
    piece = min(MAX_ACCESS_BYTES, vector_bytes & -vector_bytes)
    while piece > element_bytes:
        lanes = piece // element_bytes
        groups = byte_offsets.reshape(*byte_offsets.shape[:-1], -1, lanes)
        adjacent = (groups - groups[..., :1] == np.arange(lanes) * element_bytes).all()
        if adjacent and base_alignment % piece == 0 and (groups[..., 0] % piece == 0).all():
            break
        piece //= 2
    if piece > SWIZZLE_CHUNK:
        raise AssertionError("an access wider than a swizzle chunk")
    return piece


def piece_addresses(ctx: KernelLowering, base: SSAValue,
                    plan: AccessPlan | LaneAddresses) -> list[tuple[SSAValue, int]]:
    """For each piece of `plan`, a register and an immediate offset whose sum is its address."""
    b = ctx.b
    term = thread_term(ctx, plan.coefficients)
    if plan.mode is AddressMode.LINEAR:
        address = base if isinstance(term, int) else b.emit("add.s32 {}, {}, {};", "b32", base, term)
        return [(address, piece.offset) for piece in plan.pieces]
    if plan.mode is AddressMode.XOR:
        moved_term = None if isinstance(term, int) else _swizzle(ctx, term, plan.swizzle)
        bases: dict[int, SSAValue] = {}
        out = []
        for xor, rest in plan.split:
            if xor not in bases:
                bases[xor] = _xor_base(ctx, base, moved_term, xor)
            out.append((bases[xor], rest))
        return out
    start = base if isinstance(term, int) else b.emit("add.s32 {}, {}, {};", "b32", base, term)
    out = []
    for piece in plan.pieces:
        linear = b.emit("add.s32 {}, {}, {};", "b32", start, piece.offset) if piece.offset else start
        out.append((_swizzle(ctx, linear, plan.swizzle), 0))
    return out


def _xor_base(ctx: KernelLowering, base: SSAValue, moved_term: SSAValue | None, xor: int) -> SSAValue:
    """`base + (moved_term ^ xor)` (no moved term: the thread part is 0)."""
    b = ctx.b
    if moved_term is None:
        return b.emit("add.s32 {}, {}, {};", "b32", base, xor) if xor else base
    part = b.emit("xor.b32 {}, {}, {};", "b32", moved_term, xor) if xor else moved_term
    return b.emit("add.s32 {}, {}, {};", "b32", base, part)


def _swizzle(ctx: KernelLowering, address: SSAValue, swizzle: int) -> SSAValue:
    """`address ^ (((address >> 7) & m) << 4)` in PTX (ptx-hopper §5)."""
    b = ctx.b
    row_bits = (swizzle // SWIZZLE_CHUNK - 1) << 7
    high = b.emit("and.b32 {}, {}, {};", "b32", address, row_bits)
    shifted = b.emit("shr.u32 {}, {}, 3;", "b32", high)
    return b.emit("xor.b32 {}, {}, {};", "b32", address, shifted)

