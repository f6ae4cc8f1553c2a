"""Lowering of elementwise math on register tiles (`arith`/`math` on vectors): one instruction
(or a short fixed sequence) per element register, as docs/register-tiles.md specifies.

The same rules lower the non-index scalars the frontend makes on the way to a splat (a traced
index cast to i32, then to the tile's dtype) and float scalars: a scalar is one register.
Index arithmetic stays with `scalars.py`; `ELEMENTWISE` rules hand index operations to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    Signedness,
    VectorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.ir_utils import integer_type
from asyncdsl.dialects.layout_attrs import inferred_layout
from asyncdsl.dialects.tile_functions import TILE_FUNCTIONS, TileFunction
from asyncdsl.passes.to_ptx.context import KernelLowering, Rule
from asyncdsl.passes.to_ptx.integer_division import floor_quotient, floor_quotient_by
from asyncdsl.passes.to_ptx.tile_registers import (
    bind_tile,
    constant_register,
    element_of,
    float_suffix,
    register_kind,
    tile_of,
)

# A rule's op is None where a reduction combines two registers with no op of its own.
ElementRule = Callable[[KernelLowering, Operation | None, Attribute, list[SSAValue]], SSAValue]

SIGN_BIT = {"f32": 0x80000000, "b32": 0x80000000, "b16": 0x8000}


def _bits(element: Attribute) -> int:
    return 1 if register_kind(element) == "pred" else ir.element_bits(VectorType(element, [1]))


def _int_type(element: Attribute) -> str:
    return f"s{_bits(element)}"


def _binary_float(name: str) -> ElementRule:
    def rule(ctx, op, element, regs):
        suffix = float_suffix(element)
        return ctx.b.emit(f"{name}.rn.{suffix} {{}}, {{}}, {{}};", register_kind(element), *regs)

    return rule


def _constant_element(value: SSAValue) -> int | float | None:
    """The number every element of `value` is, where its defining op says so (a constant scalar,
    a `full` tile, or a broadcast of one).  A broadcast of a tile with size-1 dims reduces them
    away first (`frontend/tiles.py: broadcast_to`), a reduction of one element each, which
    leaves the value as it is."""
    owner = value.owner
    while isinstance(owner, (ir.BroadcastInDimOp, ir.ReduceOp)):
        if isinstance(owner, ir.ReduceOp) and _combines_elements(owner):
            return None
        owner = owner.operand.owner
    if isinstance(owner, (arith.ConstantOp, ir.FullOp)) and isinstance(owner.value, (FloatAttr, IntegerAttr)):
        return owner.value.value.data
    return None


def _combines_elements(reduction: ir.ReduceOp) -> bool:
    shape = ir.shaped_type(reduction.operand.type).get_shape()
    return math.prod(shape[axis] for axis in reduction.axes.get_values()) > 1


def _exact_reciprocal(divisor: float | None, element: Attribute) -> float | None:
    """1/divisor where multiplying by it rounds every quotient as dividing does: a power of two
    whose reciprocal `element` holds exactly (x/2^k and x·2^-k are then one real number, rounded
    once, for every x incl. subnormals, ±0, ±inf and NaN)."""
    if not isinstance(divisor, float) or not math.isfinite(divisor) or divisor == 0:
        return None
    mantissa, exponent = math.frexp(divisor)  # divisor = ±2^(exponent - 1) when mantissa is ±0.5
    lowest, highest = POWERS_OF_TWO[dtypes.from_mlir(element).name]
    if abs(mantissa) != 0.5 or not (lowest <= exponent - 1 <= highest and lowest <= 1 - exponent <= highest):
        return None
    return 1.0 / divisor  # exact in float64


# The powers of two each float type holds, 2^lowest (its smallest subnormal) to 2^highest: what
# neither rounds to 0 nor overflows.
POWERS_OF_TWO = {"float32": (-149, 127), "bfloat16": (-133, 127), "float16": (-24, 15)}


def _divide(ctx, op, element, regs):
    suffix = float_suffix(element)
    b = ctx.b
    reciprocal = _exact_reciprocal(_constant_element(op.rhs), element)
    if reciprocal is not None:
        # The IEEE `div.rn.f32` has a slow path ptxas calls as a subroutine, and registers live
        # across the call spill to the stack; a product by the exact reciprocal has neither.
        factor = constant_register(ctx, FloatAttr(reciprocal, element), element)
        return b.emit(f"mul.rn.{suffix} {{}}, {{}}, {{}};", register_kind(element), regs[0], factor)
    if suffix == "f32":
        return b.emit("div.rn.f32 {}, {}, {};", "f32", *regs)
    # No 16-bit division: the f32 quotient of the widened operands, rounded once more, is the
    # correctly rounded 16-bit quotient (24 >= 2 * 11 + 2 bits; docs/register-tiles.md).
    wide = [b.emit(f"cvt.f32.{suffix} {{}}, {{}};", "f32", r) for r in regs]
    quotient = b.emit("div.rn.f32 {}, {}, {};", "f32", *wide)
    return b.emit(f"cvt.rn.{suffix}.f32 {{}}, {{}};", "b16", quotient)


def _fma(ctx, op, element, regs):
    suffix = float_suffix(element)
    return ctx.b.emit(f"fma.rn.{suffix} {{}}, {{}}, {{}}, {{}};", register_kind(element), *regs)


def _sqrt(ctx, op, element, regs):
    """`sqrt.rn.f32`, correctly rounded; a 16-bit float widens exactly and rounds back once, which
    is its own correctly rounded root (24 >= 2 * 11 + 2).  approx=True: `sqrt.approx.ftz.f32`."""
    if "afn" in op.fastmath.data:
        return ctx.b.emit("sqrt.approx.ftz.f32 {}, {};", "f32", regs[0])
    root = ctx.b.emit("sqrt.rn.f32 {}, {};", "f32", to_f32(ctx, element, regs[0]))
    return from_f32(ctx, element, root)


def _sign_bit(instruction: str, invert: bool):
    def rule(ctx, op, element, regs):
        kind = register_kind(element)
        mask = SIGN_BIT[kind]
        mask = (~mask) & ((1 << (16 if kind == "b16" else 32)) - 1) if invert else mask
        width = 16 if kind == "b16" else 32
        return ctx.b.emit(f"{instruction}.b{width} {{}}, {{}}, {mask:#x};", kind, regs[0])

    return rule


_clear_sign = _sign_bit("and", invert=True)


# Float ops whose result is the canonical NaN whenever an operand is a NaN (docs/register-tiles.md),
# and comparisons, false (or true for `!=`) on any NaN: no NaN operand's bits reach their result.
_NAN_BLIND_USERS = (arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, xmath.FmaOp, arith.MaximumfOp,
                    arith.MinimumfOp, ir.CompareOp)


def _nan_bits_unseen(value: SSAValue) -> bool:
    """Whether no use of `value` passes a NaN's sign or payload on: each is an op of
    `_NAN_BLIND_USERS`, or a reduction that combines more than one element into each result."""
    for use in value.uses:
        user = use.operation
        if isinstance(user, ir.ReduceOp):
            if not _combines_elements(user):
                return False
        elif not isinstance(user, _NAN_BLIND_USERS):
            return False
    return True


def _abs(ctx, op, element, regs):
    # `abs.f32` alone is an add of |x| and -0, which makes a NaN canonical, not a copy with the
    # sign cleared as docs/register-tiles.md promises; but where no user can tell the two apart,
    # ptxas folds it into each user's |operand| modifier, one instruction per element fewer than
    # the `and` of the sign mask, which it never folds (the fp8 quantisation's max|x|).
    if float_suffix(element) == "f32" and _nan_bits_unseen(op.results[0]):
        return ctx.b.emit("abs.f32 {}, {};", "f32", regs[0])
    return _clear_sign(ctx, op, element, regs)


def _nan_extremum(name: str) -> ElementRule:
    def rule(ctx, op, element, regs):
        suffix = float_suffix(element)
        return ctx.b.emit(f"{name}.NaN.{suffix} {{}}, {{}}, {{}};", register_kind(element), *regs)

    return rule


def _integer(template: str) -> ElementRule:
    def rule(ctx, op, element, regs):
        kind = register_kind(element)
        width = _bits(element)
        text = template.format(s=f"s{width}", b="pred" if kind == "pred" else f"b{width}")
        return ctx.b.emit(text + " {}, {}, {};", kind, *regs)

    return rule


def _negating(template: str, negated_operand) -> ElementRule:
    """An integer op that `negated_operand(op)` may show to be a negation (0 - x, x * -1): that
    one by the builder's `negated` (a form ptxas keeps under min/max), the rest by `template`."""
    plain = _integer(template)

    def rule(ctx, op, element, regs):
        negated = negated_operand(op)
        if negated is None:
            return plain(ctx, op, element, regs)
        return ctx.b.negated(register_kind(element), regs[negated], _bits(element))

    return rule


def _subtracted_from_zero(op) -> int | None:
    return 1 if _constant_element(op.lhs) == 0 else None


def _times_minus_one(op) -> int | None:
    if _constant_element(op.rhs) == -1:
        return 0
    return 1 if _constant_element(op.lhs) == -1 else None


def _floor_divide(ctx, op, element, regs):
    divisor = _constant_element(op.rhs)
    if isinstance(divisor, int) and divisor != 0:
        return floor_quotient_by(ctx.b, regs[0], divisor)
    return floor_quotient(ctx.b, *regs)


def _compare(ctx, op, element, regs):
    # Ordered float comparisons (false on NaN) except `ne`, which is true on NaN (`neu`).
    predicate = op.predicate.data.value
    suffix = float_suffix(element)
    if suffix is not None:
        spelled = "neu" if predicate == "ne" else predicate
        return ctx.b.emit(f"setp.{spelled}.{suffix} {{}}, {{}}, {{}};", "pred", *regs)
    kind = "b" if predicate in ("eq", "ne") else "s"
    return ctx.b.emit(f"setp.{predicate}.{kind}{_bits(element)} {{}}, {{}}, {{}};", "pred", *regs)


def _select(ctx, op, element, regs):
    condition, yes, no = regs
    kind = register_kind(element)
    b = ctx.b
    if kind == "pred":
        taken = b.emit("and.pred {}, {}, {};", "pred", condition, yes)
        other = b.emit("not.pred {}, {};", "pred", condition)
        other = b.emit("and.pred {}, {}, {};", "pred", other, no)
        return b.emit("or.pred {}, {}, {};", "pred", taken, other)
    type_ = {"f32": "f32", "b32": "b32", "b16": "b16", "b64": "b64"}[kind]
    return b.emit(f"selp.{type_} {{}}, {{}}, {{}}, {{}};", kind, yes, no, condition)


def _instruction(function: TileFunction) -> ElementRule:
    """A tile function's instruction, `.ftz` where its entry says it flushes."""
    def rule(ctx, op, element, regs):
        ftz = ".ftz" if function.flushes("afn" in op.fastmath.data) else ""  # afn: the user's approx=True
        return ctx.b.emit(f"{function.instruction}.approx{ftz}.f32 {{}}, {{}};", "f32", regs[0])

    return rule


# -- conversions -------------------------------------------------------------------------------

_FLOAT8 = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}


def _float8_name(element: Attribute) -> str | None:
    return _FLOAT8.get(element.name.removeprefix("builtin.")) if hasattr(element, "name") else None


def to_f32(ctx: KernelLowering, element: Attribute, reg: SSAValue) -> SSAValue:
    """An exact f32 copy of a float element (every float type asyncdsl computes on widens exactly)."""
    b = ctx.b
    if isinstance(element, Float32Type):
        return reg
    suffix = float_suffix(element)
    if suffix is not None:
        return b.emit(f"cvt.f32.{suffix} {{}}, {{}};", "f32", reg)
    pair = b.emit(f"cvt.rn.f16x2.{_float8_name(element)}x2 {{}}, {{}};", "b32", reg)
    half = b.emit("cvt.u16.u32 {}, {};", "b16", pair)  # the low byte's value, as f16
    return b.emit("cvt.f32.f16 {}, {};", "f32", half)


def from_f32(ctx: KernelLowering, element: Attribute, reg: SSAValue) -> SSAValue:
    """`reg` rounded to nearest even into `element` (float8: saturating to the finite range)."""
    b = ctx.b
    if isinstance(element, Float32Type):
        return reg
    suffix = float_suffix(element)
    if suffix is not None:
        return b.emit(f"cvt.rn.{suffix}.f32 {{}}, {{}};", "b16", reg)
    zero = b.mov("f32", "0f00000000")
    # The pair's second operand lands in the low byte: the element's byte.
    return b.emit(f"cvt.rn.satfinite.{_float8_name(element)}x2.f32 {{}}, {{}}, {{}};", "b16", zero, reg)


def _int_letter(element: Attribute) -> str:
    """How PTX reads an integer element: `u` for the unsigned storage types, else `s`."""
    return "u" if integer_type(element).signedness.data == Signedness.UNSIGNED else "s"


def _convert(ctx, op, element, regs):
    """docs/register-tiles.md, Conversions: ints are signed (unsigned for uint8 and uint16),
    bools unsigned; floats widen exactly to f32 first, so every float conversion is one rounding."""
    source = element_of(op.value)
    b = ctx.b
    value = regs[0]
    source_kind, target_kind = register_kind(source), register_kind(element)
    source_float = not isinstance(source, IntegerType)
    target_float = not isinstance(element, IntegerType)
    if source_float and target_float:
        return from_f32(ctx, element, to_f32(ctx, source, value))
    if source_float:
        wide = to_f32(ctx, source, value)
        # Float to integer saturates to the destination's range and takes NaN to 0 (PTX cvt).
        return b.emit(f"cvt.rzi.{_int_letter(element)}{_bits(element)}.f32 {{}}, {{}};", target_kind, wide)
    if source_kind == "pred":
        value = b.emit("selp.b32 {}, 1, 0, {};", "b32", value)
        source = IntegerType(32)
    letter = _int_letter(source)
    if target_float and _bits(source) < 32:
        # PTX converts only 32- and 64-bit integers to floats; widening first is exact (a uint8's
        # or uint16's value then fits s32 too).
        value = b.emit(f"cvt.{letter}32.{letter}{_bits(source)} {{}}, {{}};", "b32", value)
        source, letter = IntegerType(32), "s"
    if target_float:
        suffix = float_suffix(element) or "f32"
        rounded = b.emit(f"cvt.rn.{suffix}.s{_bits(source)} {{}}, {{}};",
                         "f32" if suffix == "f32" else "b16", value)
        return rounded if float_suffix(element) else from_f32(ctx, element, rounded)
    if _bits(element) > _bits(source):  # sign- or zero-extended by the source's signedness
        return b.emit(f"cvt.{letter}{_bits(element)}.{letter}{_bits(source)} {{}}, {{}};", target_kind, value)
    # Narrowing keeps the low bits; narrow integers sit in the low bits of their register and
    # every use widens them with an explicit cvt from the narrow type.
    return b.emit(f"cvt.u{max(_bits(element), 16)}.u{_bits(source)} {{}}, {{}};", target_kind, value)


def _pairs_to_float8(op: ir.ConvertOp, element: Attribute, registers_shape: tuple[int, ...]) -> bool:
    """Whether a conversion converts its tile's elements two at a time: floats to float8, in
    vectors of an even length (the pair one thread holds side by side)."""
    source = element_of(op.value)
    return (_float8_name(element) is not None and not isinstance(source, IntegerType)
            and registers_shape[-1] % 2 == 0)


def _convert_pairs(ctx: KernelLowering, source_element: Attribute, element: Attribute, source: np.ndarray,
                   out: np.ndarray) -> None:
    """Each pair of adjacent vector elements with one `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`, the
    first element in the low byte: its register is the pair's halfword (8-bit elements keep their
    value in the low byte; the high byte is free), the second's the halfword shifted down.  A
    store finds the pairs in `ctx.byte_pairs` and packs halfwords whole (on the H200 the fp8
    quantisation of 4096x16384 gained 1.5-2 % over one conversion an element, same run)."""
    b = ctx.b
    name = _float8_name(element)
    for position in np.ndindex(out.shape[:-1]):
        for lane in range(0, out.shape[-1], 2):
            low, high = (to_f32(ctx, source_element, source[(*position, lane + k)]) for k in (0, 1))
            pair = b.emit(f"cvt.rn.satfinite.{name}x2.f32 {{}}, {{}}, {{}};", "b16", high, low)
            second = b.emit("shr.b16 {}, {}, 8;", "b16", pair)
            out[(*position, lane)], out[(*position, lane + 1)] = pair, second
            ctx.byte_pairs[pair], ctx.byte_pairs[second] = (pair, 0), (pair, 1)


def _index_cast(ctx, op, element, regs):
    return regs[0]  # index values already live in 32-bit registers


ELEMENT_RULES: dict[type[Operation], ElementRule] = {
    arith.AddfOp: _binary_float("add"),
    arith.SubfOp: _binary_float("sub"),
    arith.MulfOp: _binary_float("mul"),
    arith.DivfOp: _divide,
    arith.NegfOp: _sign_bit("xor", invert=False),
    xmath.AbsFOp: _abs,
    xmath.FmaOp: _fma,
    xmath.SqrtOp: _sqrt,
    arith.MaximumfOp: _nan_extremum("max"),
    arith.MinimumfOp: _nan_extremum("min"),
    arith.AddiOp: _integer("add.{s}"),
    arith.SubiOp: _negating("sub.{s}", _subtracted_from_zero),
    arith.MuliOp: _negating("mul.lo.{s}", _times_minus_one),
    arith.AndIOp: _integer("and.{b}"),
    arith.OrIOp: _integer("or.{b}"),
    arith.XOrIOp: _integer("xor.{b}"),
    arith.FloorDivSIOp: _floor_divide,
    arith.ShLIOp: _integer("shl.{b}"),
    arith.ShRSIOp: _integer("shr.{s}"),
    arith.MaxSIOp: _integer("max.{s}"),
    arith.MinSIOp: _integer("min.{s}"),
    xmath.AbsIOp: lambda ctx, op, element, regs: ctx.b.emit(
        f"abs.{_int_type(element)} {{}}, {{}};", register_kind(element), regs[0]),
    **{function.op: _instruction(function) for function in TILE_FUNCTIONS},
    arith.IndexCastOp: _index_cast,
    ir.CompareOp: _compare,
    ir.SelectOp: _select,
    ir.ConvertOp: _convert,
}


def _is_index_op(op: Operation) -> bool:
    return all(isinstance(v.type, (IndexType,))
               or (isinstance(v.type, IntegerType) and v.type.width.data == 1)
               for v in (*op.operands, *op.results)) and not isinstance(op, arith.IndexCastOp)


def elementwise(rule: ElementRule, index_rule: Rule | None) -> Rule:
    """The lowering of one `arith`/`math` op class: per element for tiles and non-index scalars,
    `index_rule` for index arithmetic and conditions."""

    def lower(ctx: KernelLowering, op: Operation) -> None:
        result = op.results[0]
        if not isinstance(result.type, VectorType):
            if index_rule is not None and _is_index_op(op):
                index_rule(ctx, op)
                return
            element = result.type
            ctx.bind(result, rule(ctx, op, element, [ctx.reg(v) for v in op.operands]))
            return
        layout = inferred_layout(result)
        operands = [tile_of(ctx, v).expanded(layout) for v in op.operands]
        element = result.type.element_type
        if isinstance(op, ir.CompareOp):
            element = ir.shaped_type(op.lhs.type).element_type
        out = np.empty(layout.registers_shape(tuple(result.type.get_shape())), dtype=object)
        if isinstance(op, ir.ConvertOp) and _pairs_to_float8(op, element, out.shape):
            _convert_pairs(ctx, element_of(op.value), element, operands[0], out)
        else:
            for position in np.ndindex(out.shape):
                # A full index of an object array is its element; numpy's stubs type an index by a
                # tuple of ints as a sub-array.
                registers = [array[position] for array in operands]
                out[position] = rule(ctx, op, element, registers)  # type: ignore[arg-type]
        bind_tile(ctx, result, out)

    return lower
