"""L2 prefetch ops of the `asyncdsl` dialect: a GMEM slice brought into L2 with no destination.

`asyncdsl.async_prefetch` is what the user wrote (a slice, transforms and swizzle, as the GMEM
side of an `async_copy`); `resolve-transforms` turns it into `asyncdsl.tma_prefetch`, one
`cp.async.bulk.prefetch.tensor` of a box through a descriptor. Planned like a load of the same
slice, the prefetch gets the same descriptor, which the kernel then holds once.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.asyncdsl_attrs import TmaDescriptorAttr
from asyncdsl.dialects.ir_utils import SWIZZLE_BYTES, int_prop, is_gmem, shape_of


@irdl_op_definition
class AsyncPrefetchOp(IRDLOperation):
    """Prefetch the GMEM slice of `gmem` (seen through `transforms`) into L2, as the user wrote it.

    `starts` and `slice_sizes` describe the slice as for `asyncdsl.async_copy` (-1: squeezed).
    Only warpgroups where `predicate` holds issue it.
    """

    name = "asyncdsl.async_prefetch"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    gmem = operand_def(MemRefType)
    starts = var_operand_def(IndexType)
    predicate = opt_operand_def(IntegerType)

    slice_sizes = prop_def(DenseArrayBase)
    transforms = prop_def(ArrayAttr)
    swizzle = prop_def(IntegerAttr)

    def __init__(
        self,
        gmem: SSAValue,
        starts: Sequence[SSAValue],
        slice_sizes: Sequence[int],
        *,
        transforms: Sequence[Attribute] = (),
        swizzle: int = 0,
        predicate: SSAValue | None = None,
    ):
        super().__init__(
            operands=[gmem, starts, [predicate] if predicate is not None else []],
            properties={
                "slice_sizes": DenseArrayBase.from_list(i64, list(slice_sizes)),
                "transforms": ArrayAttr(transforms),
                "swizzle": int_prop(swizzle),
            },
        )

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.slice_sizes.get_values())

    def verify_(self) -> None:
        if not is_gmem(self.gmem.type):
            raise VerifyException("async_prefetch brings GMEM into L2: its source must be a GMEM array")
        rank = len(shape_of(self.gmem))
        sizes = self.sizes
        if len(self.starts) != rank or len(sizes) != rank:
            raise VerifyException(
                f"the GMEM slice needs one index per dim: the ref has {rank} dims, the slice "
                f"{len(self.starts)} starts and {len(sizes)} sizes"
            )
        if any(s == 0 or s < -1 for s in sizes):
            raise VerifyException(f"slice sizes must be positive (or -1 for a squeezed dim), got {sizes}")
        if self.swizzle.value.data not in SWIZZLE_BYTES:
            raise VerifyException(f"swizzle must be one of {SWIZZLE_BYTES} bytes, got {self.swizzle.value.data}")
        _verify_predicate(self.predicate)


@irdl_op_definition
class TmaPrefetchOp(IRDLOperation):
    """One `cp.async.bulk.prefetch.tensor` of the box at `coords` (descriptor dims, array order)."""

    name = "asyncdsl.tma_prefetch"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    coords = var_operand_def(IndexType)
    predicate = opt_operand_def(IntegerType)

    descriptor = prop_def(TmaDescriptorAttr)
    descriptor_index = opt_prop_def(IntegerAttr)

    def __init__(self, coords: Sequence[SSAValue], descriptor: TmaDescriptorAttr, predicate: SSAValue | None = None):
        super().__init__(
            operands=[coords, [predicate] if predicate is not None else []],
            properties={"descriptor": descriptor},
        )

    def verify_(self) -> None:
        rank = self.descriptor.spec().rank
        if not 1 <= rank <= 5:
            raise VerifyException(f"TMA descriptors have 1 to 5 dims, got {rank}")
        if len(self.coords) != rank:
            raise VerifyException(f"a rank-{rank} descriptor takes {rank} coordinates, got {len(self.coords)}")
        _verify_predicate(self.predicate)


def _verify_predicate(predicate: SSAValue | None) -> None:
    if predicate is not None and predicate.type != i1:
        raise VerifyException(f"a prefetch's predicate is a condition (i1), got {predicate.type}")


OPERATIONS: tuple[type[Operation], ...] = (AsyncPrefetchOp, TmaPrefetchOp)
