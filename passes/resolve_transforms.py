"""`resolve-transforms`: turn each user copy into the copy the hardware performs.

Expects: `asyncdsl.async_copy` ops as traced (GMEM slice, transforms, swizzle, barrier).
Guarantees: every tiled TMA copy becomes an `asyncdsl.tma_load` or `asyncdsl.tma_store` whose
descriptor (`#asyncdsl.tma_desc`) views the GMEM argument through the commuted transform chain
(squeezed dims moved to the front, user transforms batched over them, unit dims dropped, leading
squeezed dims collapsed past 5 dims) and whose coordinates are the slice starts pushed through
that chain. Everything TMA cannot do is rejected here with a `CopyError` at the user's line
(rank > 5, box > 256, 16-byte stride and minor-dim rules, swizzle width, SMEM shape mismatch).
The planning itself is `asyncdsl.tma_plan`; this pass builds the index arithmetic in IR.

Example: `async_copy(x.at[i, ds(j, 64), :], buf, barrier=bar)` with x: 8x256x128xf32,
buf: 64x128xf32 (dim 0 squeezed, then unit-dropped):

    "asyncdsl.async_copy"(%x, %buf, %i, %j, %c0, %bars, %c0) <{slice_sizes = array<i64: -1, 64, 128>, ...}>

becomes

    "asyncdsl.tma_load"(%buf, %i, %j, %c0, %bars, %c0) <{descriptor = #asyncdsl.tma_desc<arg = 0,
        dims = [8, 256, 128], strides = [131072, 512, 4], box = [1, 64, 128], ...>,
        expect_tx_bytes = 32768 : i64}>
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.asyncdsl_attrs import TmaDescriptorAttr
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from asyncdsl import dtypes
from asyncdsl.errors import AsyncDSLError, CopyError
from asyncdsl.ir_locations import from_ir_location
from asyncdsl.tma_plan import TmaCopyPlan, plan_tiled_copy
from asyncdsl.transforms import transform_from_attr


class IndexBuilder:
    """Index arithmetic emitted as `arith` ops right before one op, for traced coordinates.

    Supports what the transform algebra uses (`+ - * // %` with ints and each other); plain ints
    never reach it, so constant parts fold in Python.
    """

    def __init__(self, anchor: Operation):
        self._anchor = anchor

    def wrap(self, value: SSAValue | int):
        return value if isinstance(value, int) else _IrIndex(value, self)

    def emit(self, op: Operation) -> SSAValue:
        op.location = self._anchor.location
        Rewriter.insert_op(op, InsertPoint.before(self._anchor))
        return op.results[0]

    def value(self, index) -> SSAValue:
        if isinstance(index, _IrIndex):
            return index.value
        return self.emit(arith.ConstantOp(IntegerAttr(int(index), IndexType())))


class _IrIndex:
    __slots__ = ("value", "builder")

    def __init__(self, value: SSAValue, builder: IndexBuilder):
        self.value = value
        self.builder = builder

    def _binary(self, other, op_class, reverse: bool = False):
        lhs, rhs = self.value, self.builder.value(other)
        if reverse:
            lhs, rhs = rhs, lhs
        return _IrIndex(self.builder.emit(op_class(lhs, rhs)), self.builder)

    def __add__(self, other):
        return self if isinstance(other, int) and other == 0 else self._binary(other, arith.AddiOp)

    __radd__ = __add__

    def __sub__(self, other):
        return self if isinstance(other, int) and other == 0 else self._binary(other, arith.SubiOp)

    def __rsub__(self, other):
        return self._binary(other, arith.SubiOp, reverse=True)

    def __mul__(self, other):
        return self if isinstance(other, int) and other == 1 else self._binary(other, arith.MuliOp)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return self._binary(other, arith.FloorDivSIOp)

    def __mod__(self, other):
        return self - (self // other) * other


@dataclass(frozen=True)
class ResolveTransforms(ModulePass):
    name = "resolve-transforms"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in attrs.kernels(op):
            for copy in [o for o in fn.walk() if isinstance(o, ir.AsyncCopyOp)]:
                try:
                    _resolve(copy)
                except AsyncDSLError as error:
                    raise error.at(from_ir_location(copy)) from None


def _resolve(copy: ir.AsyncCopyOp) -> None:
    if copy.implementation.data != "tma":
        raise CopyError(f"implementation={copy.implementation.data!r} copies are not supported yet")
    if copy.oob.data != "zeros":
        raise CopyError(f"oob={copy.oob.data!r} copies are not supported yet")
    plan = _plan(copy)
    builder = IndexBuilder(copy)
    coords = [builder.value(c) for c in plan.coords]
    descriptor = TmaDescriptorAttr.from_spec(plan.tensor_map_spec(copy.gmem.index))
    predicate = copy.predicate
    arrive = bool(copy.arrive.value.data)
    if copy.is_load:
        new = ir.TmaLoadOp(
            copy.smem, coords, copy.barriers, copy.barrier_index, descriptor,
            plan.box_bytes if arrive else 0, predicate=predicate,
        )
    else:
        reduction = copy.reduction.data if copy.reduction is not None else None
        new = ir.TmaStoreOp(copy.smem, coords, descriptor, commit=arrive, reduction=reduction, predicate=predicate)
    new.location = copy.location
    Rewriter.replace_op(copy, new, new_results=[])


def _plan(copy: ir.AsyncCopyOp) -> TmaCopyPlan:
    builder = IndexBuilder(copy)
    gmem_slice = []
    for start, size in zip(copy.starts, copy.sizes):
        known = _constant(start)
        index = known if known is not None else builder.wrap(start)
        gmem_slice.append(index if size == -1 else (index, size))
    return plan_tiled_copy(
        ir.shape_of(copy.gmem),
        dtypes.from_mlir(copy.gmem.type.element_type),
        gmem_slice,
        tuple(transform_from_attr(t) for t in copy.transforms),
        copy.swizzle.value.data,
        ir.shape_of(copy.smem),
    )


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None
