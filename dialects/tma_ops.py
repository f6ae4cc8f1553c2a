"""Hardware-level TMA ops of the `asyncdsl` dialect: one `cp.async.bulk.tensor` instruction each,
with the descriptor the host encodes. `resolve-transforms` produces them."""

from __future__ import annotations

from collections.abc import Sequence

from asyncdsl.dialects.asyncdsl_attrs import BarriersType, TmaDescriptorAttr
from asyncdsl.dialects.ir_utils import bool_prop, int_prop, is_smem, shape_of
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
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


@irdl_op_definition
class TmaLoadOp(IRDLOperation):
    """One `cp.async.bulk.tensor` load of the box at `coords` (descriptor dims, array order) into
    `smem`, completing `expect_tx_bytes` on `barriers[barrier_index]` (0: the user arrives).

    `multicast_mask` (bit i = CTA rank i of the cluster) makes the box land in every CTA of the
    mask at the same offset.
    """

    name = "asyncdsl.tma_load"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    smem = operand_def(MemRefType)
    coords = var_operand_def(IndexType)
    barriers = operand_def(BarriersType)
    barrier_index = operand_def(IndexType)
    predicate = opt_operand_def(IntegerType)

    descriptor = prop_def(TmaDescriptorAttr)
    expect_tx_bytes = prop_def(IntegerAttr)
    multicast_mask = opt_prop_def(IntegerAttr)
    descriptor_index = opt_prop_def(IntegerAttr)

    def __init__(
        self,
        smem: SSAValue,
        coords: Sequence[SSAValue],
        barriers: SSAValue,
        barrier_index: SSAValue,
        descriptor: TmaDescriptorAttr,
        expect_tx_bytes: int,
        predicate: SSAValue | None = None,
        multicast_mask: int | None = None,
    ):
        properties: dict[str, Attribute] = {
            "descriptor": descriptor,
            "expect_tx_bytes": int_prop(expect_tx_bytes),
        }
        if multicast_mask is not None:
            properties["multicast_mask"] = int_prop(multicast_mask)
        super().__init__(
            operands=[smem, coords, barriers, barrier_index, [predicate] if predicate else []],
            properties=properties,
        )

    def verify_(self) -> None:
        _verify_tma(self.smem, self.coords, self.descriptor)
        if self.multicast_mask is not None and not 0 < self.multicast_mask.value.data < 2**16:
            raise VerifyException(f"multicast mask must be a non-empty 16-bit mask, got {self.multicast_mask.value.data}")


@irdl_op_definition
class TmaStoreOp(IRDLOperation):
    """One `cp.async.bulk.tensor` store (or `cp.reduce.async.bulk.tensor` with `reduction`) of
    `smem` into the box at `coords`, committed as a bulk group when `commit` is set."""

    name = "asyncdsl.tma_store"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    smem = operand_def(MemRefType)
    coords = var_operand_def(IndexType)
    predicate = opt_operand_def(IntegerType)

    descriptor = prop_def(TmaDescriptorAttr)
    commit = prop_def(IntegerAttr)
    reduction = opt_prop_def(StringAttr)
    descriptor_index = opt_prop_def(IntegerAttr)

    def __init__(
        self,
        smem: SSAValue,
        coords: Sequence[SSAValue],
        descriptor: TmaDescriptorAttr,
        commit: bool = True,
        reduction: str | None = None,
        predicate: SSAValue | None = None,
    ):
        properties: dict[str, Attribute] = {"descriptor": descriptor, "commit": bool_prop(commit)}
        if reduction is not None:
            properties["reduction"] = StringAttr(reduction)
        super().__init__(operands=[smem, coords, [predicate] if predicate else []], properties=properties)

    def verify_(self) -> None:
        _verify_tma(self.smem, self.coords, self.descriptor)


def _verify_tma(smem: SSAValue, coords: Sequence[SSAValue], descriptor: TmaDescriptorAttr) -> None:
    spec = descriptor.spec()
    if not is_smem(smem.type):
        raise VerifyException("a TMA copy's SMEM operand must be a shared-memory buffer")
    if len(coords) != spec.rank:
        raise VerifyException(f"a rank-{spec.rank} descriptor takes {spec.rank} coordinates, got {len(coords)}")
    if not 1 <= spec.rank <= 5:
        raise VerifyException(f"TMA descriptors have 1 to 5 dims, got {spec.rank}")
    smem_elems = 1
    for d in shape_of(smem):
        smem_elems *= d
    box_elems = spec.box_bytes // spec.element_bytes
    if smem_elems != box_elems:
        raise VerifyException(
            f"the SMEM buffer holds {smem_elems} elements but the TMA box {spec.box_dims} holds {box_elems}"
        )



OPERATIONS: tuple[type[Operation], ...] = (TmaLoadOp, TmaStoreOp)
