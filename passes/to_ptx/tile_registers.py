"""Register tiles as PTX registers: each thread's register array, and the per-element types.

A tile value lowers to a `TileRegisters`: the layout, the logical shape, and a numpy object array
of PTX registers shaped like `layout.registers_shape(shape)` (the last dim the vector lanes), one
register per element.  A splat has one register standing for every element.  The same PTX runs
in every thread, so every map between register slots built here is checked to be the same for
all 128 threads (layouts are affine in the thread's bits, which makes it so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    VectorType,
)
from xdsl.ir import Attribute, SSAValue

from asyncdsl import dtypes
from asyncdsl.dialects.ir_utils import shaped_type
from asyncdsl.dialects.layout_attrs import inferred_layout
from asyncdsl.errors import LayoutError
from asyncdsl.hw.fragments import Layout, SplatLayout
from asyncdsl.hw.tiling import THREADS, flat_index
from asyncdsl.passes.to_ptx.context import KernelLowering
from asyncdsl.passes.to_ptx.gmem_addresses import wide_product


@dataclass(frozen=True)
class TileRegisters:
    layout: Layout
    shape: tuple[int, ...]
    regs: np.ndarray  # object array of registers, layout.registers_shape(shape)

    @property
    def is_splat(self) -> bool:
        return isinstance(self.layout, SplatLayout)

    def flat(self) -> list[SSAValue]:
        """The registers in register order, vector lanes innermost."""
        return list(self.regs.reshape(-1))

    def expanded(self, layout: Layout) -> np.ndarray:
        """This tile's registers as a `layout` array (a splat repeats its one register)."""
        if self.is_splat:
            return np.full(layout.registers_shape(self.shape), self.regs.reshape(-1)[0], dtype=object)
        assert layout == self.layout, (layout, self.layout)
        return self.regs


def register_kind(element: Attribute) -> str:
    """The PTX register class one element of a tile lives in."""
    if isinstance(element, Float32Type):
        return "f32"
    if isinstance(element, IntegerType) and element.width.data == 1:
        return "pred"
    bits = dtypes.from_mlir(element).bits
    if bits == 64:
        return "b64"
    return "b32" if bits == 32 else "b16"


def float_suffix(element: Attribute) -> str | None:
    """`f32`, `bf16` or `f16` for float elements PTX computes on; None otherwise."""
    if isinstance(element, Float32Type):
        return "f32"
    if isinstance(element, BFloat16Type):
        return "bf16"
    if isinstance(element, Float16Type):
        return "f16"
    return None


def element_of(value: SSAValue) -> Attribute:
    return value.type.element_type if isinstance(value.type, VectorType) else value.type


def tile_of(ctx: KernelLowering, value: SSAValue) -> TileRegisters:
    return ctx.tiles[value]


def bind_tile(ctx: KernelLowering, value: SSAValue, regs: np.ndarray) -> None:
    layout = inferred_layout(value)
    shape = tuple(shaped_type(value.type).get_shape())
    expected = layout.registers_shape(shape)
    assert regs.shape == expected, (regs.shape, expected)
    ctx.tiles[value] = TileRegisters(layout, shape, regs)


def uniform(per_thread: np.ndarray, what: str) -> np.ndarray:
    """`per_thread[0]`, checked equal for every thread (PTX code is the same in every thread)."""
    if not (per_thread == per_thread[0]).all():
        raise LayoutError(
            f"{what} differs between threads; this layout pair needs a data movement the lowering lacks")
    return per_thread[0]


def slot_map(source: Layout, source_shape, target: Layout, target_shape, project) -> np.ndarray:
    """For each register slot of a `target` tile (flat, register order), the slot of the
    `source` tile in the same thread holding element `project(target coordinates)`."""
    target_coordinates = target.coordinates(target_shape)  # (128, *registers, rank)
    wanted = project(target_coordinates.reshape(THREADS, -1, len(target_shape)))
    source_coordinates = source.coordinates(source_shape).reshape(THREADS, -1, len(source_shape))
    source_flat = flat_index(source_coordinates, source_shape)  # (128, slots)
    wanted_flat = flat_index(wanted, source_shape)
    slots = np.empty(wanted_flat.shape, dtype=int)
    for thread in range(THREADS):
        position = {element: slot for slot, element in enumerate(source_flat[thread])}
        try:
            slots[thread] = [position[element] for element in wanted_flat[thread]]
        except KeyError:
            raise LayoutError("a thread lacks an element it needs; the layouts are not compatible") from None
    return uniform(slots, "the register map")


def thread_coefficients(per_thread: np.ndarray, what: str) -> list[int]:
    """`per_thread[t]` (an integer per thread, 0 for thread 0) as a sum over the bits of t:
    coefficient b multiplies bit b.  Layouts split threads by power-of-two digits, so every
    per-thread offset they give is such a sum (checked)."""
    per_thread = np.asarray(per_thread, dtype=np.int64)
    coefficients = [int(per_thread[1 << bit] - per_thread[0]) for bit in range(7)]
    threads = np.arange(THREADS)
    rebuilt = per_thread[0] + sum(((threads >> bit) & 1) * c for bit, c in enumerate(coefficients))
    if not (rebuilt == per_thread).all():
        raise LayoutError(f"{what} is not linear in the thread's bits")
    return coefficients


def thread_term(ctx: KernelLowering, coefficients: list[int],
                wide_factor: int | None = None) -> SSAValue | int:
    """Sum over the bits of the thread's index in its warpgroup of bit b × `coefficients[b]`,
    as a register (or 0).  Runs of bits whose coefficients double are one shift-mask-multiply.
    With `wide_factor`, the sum times it as a b64 register, each run's field widened as it is
    multiplied (`mul.wide`), for sums that may not fit 32 bits (a GMEM tile whose threads span
    rows of 2^24 elements or more)."""
    b = ctx.b
    thread = ctx.facts.thread
    terms: list[SSAValue] = []
    bit = 0
    while bit < 7:
        if coefficients[bit] == 0:
            bit += 1
            continue
        end = bit + 1
        while end < 7 and coefficients[end] == 2 * coefficients[end - 1]:
            end += 1
        field = b.emit("bfe.u32 {}, {}, {}, {};", "b32", thread, bit, end - bit) if bit or end < 7 else thread
        scale = coefficients[bit]
        if wide_factor is not None:
            field = wide_product(ctx, field, scale * wide_factor, signed=True)
        elif scale != 1:
            field = b.emit("mul.lo.s32 {}, {}, {};", "b32", field, scale)
        terms.append(field)
        bit = end
    if not terms:
        return 0
    total = terms[0]
    add = "add.s32" if wide_factor is None else "add.s64"
    for term in terms[1:]:
        total = b.emit(f"{add} {{}}, {{}}, {{}};", "b32" if wide_factor is None else "b64", total, term)
    return total


def constant_register(ctx: KernelLowering, attr: FloatAttr | IntegerAttr, element) -> SSAValue:
    """A register holding `attr` as an element of type `element` (its bits, rounded by numpy as
    the interpreter rounds it; a NaN is the canonical NaN, every bit but the sign set, as the
    interpreter makes a NaN constant: numpy's quiet NaN, `0x7fc00000`, would reach memory as it
    is, through `mov`, `selp` and stores)."""
    b = ctx.b
    kind = register_kind(element)
    if kind == "pred":
        return b.emit("setp.ne.u32 {}, {}, 0;", "pred", b.mov("b32", int(bool(attr.value.data))))
    dtype = dtypes.from_mlir(element)
    if isinstance(attr, FloatAttr) and math.isnan(attr.value.data):
        bits = (1 << (dtype.bits - 1)) - 1
    else:
        bits = int(
            np.asarray(attr.value.data).astype(dtype.numpy).reshape(1).view(f"u{max(dtype.bits, 8) // 8}")[0])
    if kind == "f32":
        return b.mov("f32", f"0f{bits:08X}")
    return b.mov(kind, f"{bits:#x}")
