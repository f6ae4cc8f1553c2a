"""L2 prefetch ops of the `asyncdsl` dialect: a GMEM slice brought into L2 with no destination.

`asyncdsl.async_prefetch` is what the user wrote (a slice, transforms and swizzle, as the GMEM
side of an `async_copy`); `resolve-transforms` turns it into `asyncdsl.tma_prefetch`, one
`cp.async.bulk.prefetch.tensor` of a box through a descriptor. Planned like a load of the same
slice, the prefetch gets the same descriptor, which the kernel then holds once.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IndexType, IntegerAttr, MemRefType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, var_operand_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.copy_bases import GmemSlice, Predicated, TmaDescribed, sizes_prop
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.ir_utils import SegmentedOperands, int_prop, is_gmem, optional_operand, shape_of
from asyncdsl.dialects.ir_utils import verify_descriptor_coordinates, verify_gmem_slice, verify_predicate
from asyncdsl.dialects.ir_utils import verify_swizzle


@irdl_op_definition
class AsyncPrefetchOp(GmemSlice, Predicated, SegmentedOperands):
    """Prefetch the GMEM slice of `gmem` (seen through `transforms`) into L2, as the user wrote it.

    `starts` and `slice_sizes` describe the slice as for `asyncdsl.async_copy` (-1: squeezed).
    Only warpgroups where `predicate` holds issue it.
    """

    name = "asyncdsl.async_prefetch"

    gmem = operand_def(MemRefType)

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
            operands=[gmem, starts, optional_operand(predicate)],
            properties={
                "slice_sizes": sizes_prop(slice_sizes),
                "transforms": ArrayAttr(transforms),
                "swizzle": int_prop(swizzle),
            },
        )

    def verify_(self) -> None:
        if not is_gmem(self.gmem.type):
            raise VerifyException("async_prefetch brings GMEM into L2: its source must be a GMEM array")
        verify_gmem_slice(len(shape_of(self.gmem)), self.starts, self.sizes)
        verify_swizzle(self.swizzle.value.data)
        verify_predicate("a prefetch", self.predicate)


@irdl_op_definition
class TmaPrefetchOp(TmaDescribed, Predicated, SegmentedOperands):
    """One `cp.async.bulk.prefetch.tensor` of the box at `coords` (descriptor dims, array order)."""

    name = "asyncdsl.tma_prefetch"

    coords = var_operand_def(IndexType)

    def __init__(self, coords: Sequence[SSAValue], descriptor: TmaDescriptorAttr,
                 predicate: SSAValue | None = None):
        super().__init__(
            operands=[coords, optional_operand(predicate)],
            properties={"descriptor": descriptor},
        )

    def verify_(self) -> None:
        verify_descriptor_coordinates(self.descriptor.spec().rank, self.coords)
        verify_predicate("a prefetch", self.predicate)


OPERATIONS: tuple[type[Operation], ...] = (AsyncPrefetchOp, TmaPrefetchOp)
