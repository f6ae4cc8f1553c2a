"""wgmma, Hopper's warpgroup matrix multiply: what it takes, and how its operands are described.

One `wgmma.mma_async` multiplies an (64, K) A by a (K, N) B into a 64×N accumulator of the
warpgroup, K being 16 for 16-bit inputs, 8 for tf32 and 32 for 8-bit ones (docs/hardware.md §14).
An `asyncdsl.wgmma` of an (M, K) A is one instruction per 64-row group and per K step.

Operands in shared memory are given to the tensor cores by 64-bit *matrix descriptors*: a start
address, two byte strides (LBO, SBO) and a swizzle mode.  The hardware reads an operand as
8-row × swizzle-span "atoms", the same bytes a TMA copy writes into a buffer tiled `(8, S)`
(S = swizzle bytes / element bytes) with that swizzle, so a buffer's `SmemLayout` decides its
descriptors.  The contiguous dim of the stored operand decides its *major*:

- K-major (A stored (M, K), B stored (N, K)): each row of an atom is 8.. consecutive K; atoms of
  8 MN rows follow each other at SBO; a K step moves the start address 32 bytes along the row
  (and to the next K atom after the swizzle span).  LBO is unused.
- MN-major (A stored (K, M), B stored (K, N)): each atom row is S consecutive MN elements of one
  K; 8 K rows make an atom; MN atoms follow each other at LBO and 8-K groups at SBO.  Only 16-bit
  types can be read this way (the instruction's transpose bit).

`OperandPlan` is what `plan-smem-access` computes from a layout; `decode_descriptor` and
`operand_addresses` are the independent reading of a descriptor *as the hardware does*, which
the interpreter uses, so a wrong plan gives wrong numbers on the CPU as well as on the GPU.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asyncdsl import dtypes
from asyncdsl.dtypes import DType
from asyncdsl.errors import LayoutError, MmaError
from asyncdsl.hw.smem_layout import SmemLayout, describe_chain
from asyncdsl.hw.swizzle import swizzled
from asyncdsl.hw.tiling import THREADS, tile_shape

INSTRUCTION_M = 64  # rows of one instruction's accumulator
MAX_N = 256
DESCRIPTOR_SWIZZLE_CODES = {128: 1, 64: 2, 32: 3}  # bits 62-63; 0 is the unswizzled layout
_SWIZZLE_OF_CODE = {code: span for span, code in DESCRIPTOR_SWIZZLE_CODES.items()}
_FIELD = 0x3FFF  # addresses and strides are 14-bit fields in units of 16 bytes
# N the 8-bit integer instructions take (PTX ISA: "wgmma.mma_async" shapes).
_INTEGER_N = frozenset((8, 16, 24, *range(32, MAX_N + 1, 16)))


@dataclass(frozen=True)
class MmaTypes:
    """One supported (accumulator, A, B) type triple and the instruction that multiplies it."""

    accumulator: DType
    a: DType
    b: DType
    k: int  # the instruction's K
    ptx: str  # type suffix of the instruction, e.g. "f32.bf16.bf16"

    @property
    def transposable(self) -> bool:
        """Only 16-bit inputs may be MN-major (PTX ISA: imm-trans-a/b)."""
        return self.a.bits == 16

    @property
    def integer(self) -> bool:
        return self.accumulator.kind == "int"

    @property
    def ptx_version(self) -> tuple[int, int]:
        """The PTX ISA version (major, minor) the instruction needs: mixing s8 and u8 came in 8.4."""
        return (8, 4) if self.integer and self.a != self.b else (8, 0)

    def check_n(self, n: int) -> None:
        if not (8 <= n <= MAX_N and n % 8 == 0) or (self.integer and n not in _INTEGER_N):
            allowed = ("8, 16, 24 or a multiple of 16 up to 256" if self.integer
                       else "a multiple of 8 from 8 to 256")
            raise MmaError(f"a {self.ptx} wgmma's N (the accumulator's columns) must be {allowed}, got {n}")


_FP8 = (dtypes.float8_e4m3fn, dtypes.float8_e5m2)
_PTX_NAME = {
    dtypes.bfloat16: "bf16", dtypes.float16: "f16", dtypes.float32: "tf32",
    dtypes.float8_e4m3fn: "e4m3", dtypes.float8_e5m2: "e5m2", dtypes.int8: "s8", dtypes.uint8: "u8",
}


def _table() -> dict[tuple[DType, DType, DType], MmaTypes]:
    pairs = [(dtypes.bfloat16, dtypes.bfloat16, 16), (dtypes.float16, dtypes.float16, 16),
             (dtypes.float32, dtypes.float32, 8)]
    pairs += [(a, b, 32) for a in _FP8 for b in _FP8]
    table = {
        (dtypes.float32, a, b): MmaTypes(dtypes.float32, a, b, k, f"f32.{_PTX_NAME[a]}.{_PTX_NAME[b]}")
        for a, b, k in pairs
    }
    for a in (dtypes.int8, dtypes.uint8):
        for b in (dtypes.int8, dtypes.uint8):
            table[dtypes.int32, a, b] = MmaTypes(dtypes.int32, a, b, 32, f"s32.{_PTX_NAME[a]}.{_PTX_NAME[b]}")
    return table


SUPPORTED_TYPES = _table()


def mma_types(accumulator: DType, a: DType, b: DType) -> MmaTypes:
    """The instruction for these types, or an MmaError listing what the tensor cores take."""
    found = SUPPORTED_TYPES.get((accumulator, a, b))
    if found is not None:
        return found
    if accumulator == dtypes.float16:
        raise MmaError("float16 accumulators are not supported; accumulate in float32 and convert (astype)")
    listed = "; ".join(
        f"{acc} += {x} @ {y}" for acc, x, y in (
            (dtypes.float32, "bfloat16", "bfloat16"), (dtypes.float32, "float16", "float16"),
            (dtypes.float32, "float32 (as tf32)", "float32"),
            (dtypes.float32, "float8 e4m3/e5m2", "float8 e4m3/e5m2"),
            (dtypes.int32, "int8/uint8", "int8/uint8"),
        )
    )
    raise MmaError(f"wgmma cannot compute {accumulator} += {a} @ {b}; the tensor cores take: {listed}")


# -- descriptors ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Descriptor:
    """The fields of a shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format")."""

    start: int  # shared address of the operand's first atom, a multiple of 16
    lbo: int  # bytes
    sbo: int  # bytes
    swizzle: int  # bytes: 32, 64 or 128 (0: the unswizzled layout)
    base_offset: int = 0


def encode_descriptor(start: int, lbo: int, sbo: int, swizzle: int) -> int:
    """The 64-bit descriptor of an operand at shared address `start`."""
    for name, value in (("start address", start), ("LBO", lbo), ("SBO", sbo)):
        if value % 16 or not 0 <= value >> 4 <= (_FIELD if name != "start address" else 0x3FFFF >> 4):
            raise MmaError(
                f"a wgmma descriptor's {name} must be a multiple of 16 that fits its field, got {value}")
    return (start >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (DESCRIPTOR_SWIZZLE_CODES[swizzle] << 62)


def decode_descriptor(descriptor: int) -> Descriptor:
    code = descriptor >> 62
    return Descriptor(
        start=(descriptor & _FIELD) << 4,
        lbo=((descriptor >> 16) & _FIELD) << 4,
        sbo=((descriptor >> 32) & _FIELD) << 4,
        swizzle=_SWIZZLE_OF_CODE.get(code, 0),
        base_offset=(descriptor >> 49) & 0x7,
    )


def operand_addresses(descriptor: int, k_major: bool, element_bytes: int, mn: int, k: int) -> np.ndarray:
    """The absolute shared address of every byte of the (mn, k) operand one instruction reads
    through `descriptor`: shape `(mn, k, element_bytes)`.  The hardware's canonical layouts
    (PTX ISA, "Shared Memory Matrix Layout"): rows of `swizzle` bytes, 8 rows an atom, the
    16-byte chunks of each row XOR-ed with the row's index within the atom (`hw.swizzle`)."""
    fields = decode_descriptor(descriptor)
    if not fields.swizzle or fields.base_offset:
        raise MmaError("the interpreter reads swizzled wgmma operands that start on a pattern boundary only")
    span = fields.swizzle
    per_row = span // element_bytes
    m_index = np.arange(mn)[:, None]
    k_index = np.arange(k)[None, :]
    if k_major:  # rows are MN, K runs along the row; 8-row groups at SBO
        offsets = (m_index % 8) * span + (m_index // 8) * fields.sbo + k_index * element_bytes
    else:  # rows are K, MN runs along the row; MN atoms at LBO, 8-K groups at SBO
        offsets = ((m_index % per_row) * element_bytes + (m_index // per_row) * fields.lbo
                   + (k_index % 8) * span + (k_index // 8) * fields.sbo)
    linear = fields.start + offsets[..., None] + np.arange(element_bytes)
    return swizzled(linear, span)


# -- planning from a buffer's layout ---------------------------------------------------------------


@dataclass(frozen=True)
class OperandPlan:
    """How one SMEM operand of an `asyncdsl.wgmma` is described to the tensor cores.

    The descriptor of the instruction for 64-row group `g` (A only) and K step `j` is that of
    `buffer address + mn_offsets[g] + k_offsets[j]` with these strides."""

    k_major: bool
    swizzle: int
    lbo: int
    sbo: int
    k_offsets: tuple[int, ...]
    mn_offsets: tuple[int, ...]

    def descriptor(self, address: int, group: int, step: int) -> int:
        return encode_descriptor(address + self.mn_offsets[group] + self.k_offsets[step], self.lbo,
                                 self.sbo, self.swizzle)

    @property
    def constant_bits(self) -> int:
        """The descriptor without its start address: what the PTX ORs onto `address >> 4`."""
        return encode_descriptor(0, self.lbo, self.sbo, self.swizzle)


def wanted_layout(element: DType) -> str:
    options = ", ".join(
        f"transforms=TileTransform((8, {span // element.itemsize})), swizzle={span}" for span in (128, 64, 32)
    )
    return f"one of: {options}"


# Cached: it checks every element of the buffer, and the op's verifier and `plan-smem-access` both ask
# for the same operands' plans (every argument is an immutable value).
@functools.lru_cache(maxsize=256)
def plan_operand(layout: SmemLayout | None, stored: tuple[int, int], element: DType, k_is_column: bool,
                 types: MmaTypes, what: str, whole_mn: bool = False) -> OperandPlan:
    """The plan of an operand whose buffer holds a `stored` (rows, columns) matrix laid out as
    `layout`; `k_is_column` says whether K is the stored matrix's column (contiguous) dim;
    `whole_mn`: one instruction reads all of MN (B, whose MN is N), else 64 rows each (A).

    Any layout whose bytes are what the hardware reads is accepted: rows of one swizzle span
    (S elements), 8 rows an atom, and within what one instruction reads, atoms at one stride
    along MN and one along K.  `TileTransform((8, S))` is the usual one; `TileTransform((R, S))`
    (whole columns of atoms, which a TMA box per column fills) and a plain swizzled buffer S
    wide are others.  The strides and each instruction's start are read off the layout and
    every element is checked."""
    rows, columns = stored
    wanted = wanted_layout(element)
    if layout is None or not layout.swizzle_bytes or len(layout.logical_shape) != 2:
        raise MmaError(
            f"{what} in shared memory must carry a swizzled layout the tensor cores read: {wanted}")
    if not k_is_column and not types.transposable:
        raise MmaError(
            f"{what}: {element} operands must have K as their contiguous dim (only 16-bit types can be "
            "transposed); store it the other way round, or pass the buffer's .T"
        )
    span = layout.swizzle_bytes
    per_row = span // element.itemsize
    offsets = layout.element_offsets(np.indices(stored)) * element.itemsize  # bytes, before the swizzle
    if not k_is_column:
        offsets = offsets.T  # as (MN, K)
    mn_extent, k_extent = offsets.shape
    group_rows = mn_extent if whole_mn or mn_extent % INSTRUCTION_M else INSTRUCTION_M
    k_steps = range(0, k_extent, types.k)
    groups = range(0, mn_extent, group_rows)
    first = offsets[:group_rows, :types.k]
    if k_is_column:  # atoms: 8 MN rows x per_row K; 8-row groups at SBO
        lbo, sbo = 16, (int(first[8, 0] - first[0, 0]) if group_rows > 8 else 8 * span)
    else:  # atoms: per_row MN x 8 K rows; MN atoms at LBO, 8-deep K groups at SBO
        lbo = (int(first[per_row, 0] - first[0, 0]) if group_rows > per_row
               else rows * columns * element.itemsize)
        sbo = int(first[0, 8] - first[0, 0]) if types.k > 8 else 8 * span
    mn = np.arange(group_rows)[:, None]
    k = np.arange(types.k)[None, :]
    if k_is_column:
        canonical = (mn % 8) * span + (mn // 8) * sbo + k * element.itemsize
    else:
        canonical = ((mn % per_row) * element.itemsize + (mn // per_row) * lbo + (k % 8) * span
                     + (k // 8) * sbo)
    k_offsets = tuple(int(offsets[0, j]) for j in k_steps)
    mn_offsets = tuple(int(offsets[g, 0]) for g in groups)
    for g, mn_offset in zip(groups, mn_offsets):
        for j, k_offset in zip(k_steps, k_offsets):
            block = offsets[g:g + group_rows, j:j + types.k]
            base = int(block[0, 0])
            if base != mn_offset + k_offset:  # where the descriptor of block (g, j) will start
                raise MmaError(
                    f"{what} is laid out with transforms {describe_chain(layout.transforms)} over "
                    f"{layout.logical_shape}: its instructions do not start at a row offset plus a column "
                    f"offset; the tensor cores read {wanted}"
                )
            # An instruction's atoms start on a swizzle-pattern boundary (K-major steps move along a row).
            atom_start = base - base % span if k_is_column else base
            if atom_start % (8 * span) or not np.array_equal(block - base, canonical):
                raise MmaError(
                    f"{what} is laid out with transforms {describe_chain(layout.transforms)} and swizzle "
                    f"{span} over {layout.logical_shape}; the tensor cores read a 2-d buffer "
                    f"laid out as {wanted}"
                )
    return OperandPlan(k_is_column, span, lbo, sbo, k_offsets, mn_offsets)


def check_shapes(acc: tuple[int, ...], a: tuple[int, int], b: tuple[int, int], types: MmaTypes) -> None:
    """The shape rules: acc (M, N), a (M, K), b (K, N); M a multiple of 64; N per the type; K a
    multiple of the instruction's."""
    if len(acc) != 2:
        raise MmaError(f"a wgmma accumulator is an (M, N) tile, got shape {acc}")
    m, n = acc
    if m % INSTRUCTION_M or m == 0:
        raise MmaError(f"a wgmma accumulator's M must be a multiple of {INSTRUCTION_M}, got {m}")
    types.check_n(n)
    if a[0] != m or b[1] != n or a[1] != b[0]:
        raise MmaError(
            f"wgmma shapes do not agree: acc {acc} += a {a} @ b {b} (need (M, N) += (M, K) @ (K, N))")
    k = a[1]
    if k % types.k or k == 0:
        raise MmaError(f"a {types.ptx} wgmma's K must be a multiple of {types.k}, got {k}")


def register_count(acc: Sequence[int]) -> int:
    """32-bit accumulator registers per thread, for an accumulator of shape `acc`."""
    return math.prod(acc) // 128


def wgmma_a_registers(shape: Sequence[int]) -> np.ndarray:
    """The registers of an (M, K) tile in `WGMMA` layout that form wgmma's register A operand:
    `[m, j, i]` is the flat register (register order) that is `a<i>` of k16 step `j` for rows
    `64 m …`.  Each holds two adjacent columns, vector lane 0 the lower: for 16-bit data the two
    halves of the `.b32` (lane 0 low); from f32, `a<i> = cvt.rn.bf16x2.f32(lane 1, lane 0)`.

    Why it is free: WGMMA's register order is (64-row block, 8-column block, 8-row half), so the
    two column blocks × two row halves of a k16 step are 4 consecutive registers in a0…a3 order
    (docs/hardware.md §14.3, §14.4); f32 accumulator registers 8j … 8j+7 are step j's operand."""
    shape = tile_shape(shape)
    if len(shape) != 2 or shape[0] % 64 or shape[1] % 16:
        raise LayoutError(
            f"a wgmma A operand is an (M, K) tile with M % 64 == 0 and K % 16 == 0, got {shape}")
    rows, columns = shape
    return np.arange(rows * columns // (2 * THREADS)).reshape(rows // 64, columns // 16, 4)


# Registers a warpgroup needs besides its accumulators (descriptors, addresses, loop state,
# barrier phases): what ptxas -v showed the GEMM and attention kernels use beyond theirs.
ACCUMULATOR_RESERVE = 24


def check_accumulator_budget(accumulators: list[tuple[str, int]], budget: int, where: str) -> None:
    """Refuse accumulators ((name, registers per thread) each) that cannot stay in the
    warpgroup's `budget`: ptxas would serialize the wgmma pipeline and spill (advisory C7511)."""
    total = sum(count for _, count in accumulators)
    if total + ACCUMULATOR_RESERVE > budget:
        listed = ", ".join(f"{name}: {count}" for name, count in accumulators)
        raise MmaError(
            f"the wgmma accumulators take {total} registers per thread ({listed}); with about "
            f"{ACCUMULATOR_RESERVE} more for everything else that exceeds the {budget} each thread of "
            f"{where} has (ptxas would serialize the wgmmas and spill): split the tile over more warpgroups, "
            "use a smaller N, or give the role more registers (asyncdsl.warpgroup_role(..., registers=))"
        )
