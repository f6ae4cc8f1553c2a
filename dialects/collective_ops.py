"""Ops of the `asyncdsl` dialect that `partition-collectives` builds around a collective load:
the multicast mask of the CTA's group, and the part of an SMEM buffer the CTA's copy fills.

    %mask = "asyncdsl.cluster_collective_mask"() <{cluster = array<i64: 2, 2, 1>,
        collective = ["x"]}> : () -> index                          // 0b0011 or 0b1100
    %part = "asyncdsl.smem_slice"(%buf, %offset) : (memref<64x64xf32, #asyncdsl.smem>, index)
        -> memref<32x64xf32, #asyncdsl.smem>                        // bytes [offset, +8192)

and the arrival of `bar.arrive(collective=...)` on the same barrier in every CTA of the group:

    "asyncdsl.cluster_arrive"(%bars, %i) <{cluster = array<i64: 2, 1, 1>, collective = ["x"],
        count = 1 : i64}> : (!asyncdsl.barriers<4>, index) -> ()
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IndexType, MemRefType
from xdsl.dialects.builtin import StringAttr, UnitAttr, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import CLUSTER_DIMS, IndexValued, buffer_bytes, int_prop, is_smem, shape_of
from asyncdsl.dialects.ir_utils import collective_prop, memref_type, smem_type, verify_collective_dims
from asyncdsl.dialects.sync_ops import Arrival
from asyncdsl.hw.collective import CollectiveGroup
from asyncdsl.hw.limits import MAX_MULTICAST_CTAS


class _CollectiveGroup(IRDLOperation):
    """An op on this CTA's group in a `cluster` along the `collective` dims: the CTAs sharing its
    coordinates along the other dims."""

    collective = prop_def(ArrayAttr)
    cluster = prop_def(DenseArrayBase)

    def group(self) -> CollectiveGroup:
        axes = tuple(sorted(CLUSTER_DIMS.index(d.data) for d in self.collective))
        x, y, z = self._extents()
        return CollectiveGroup((x, y, z), axes)

    def _extents(self) -> tuple[int, ...]:
        return tuple(self.cluster.get_values())

    def verify_group(self) -> None:
        cluster = self._extents()
        if len(cluster) != 3 or any(extent < 1 for extent in cluster):
            raise VerifyException(f"cluster must be 3 positive extents, got {cluster}")
        if math.prod(cluster) > MAX_MULTICAST_CTAS:
            raise VerifyException(
                f"a multicast mask has {MAX_MULTICAST_CTAS} bits; cluster {cluster} has more CTAs"
            )
        dims = [d.data if isinstance(d, StringAttr) else d for d in self.collective]
        verify_collective_dims(dims, empty_allowed=False)


def _group_props(collective: Sequence[str], cluster: Sequence[int]) -> dict[str, Attribute]:
    return {"collective": collective_prop(collective),
            "cluster": DenseArrayBase.from_list(i64, list(cluster))}


@irdl_op_definition
class ClusterCollectiveMaskOp(_CollectiveGroup, IndexValued):
    """The multicast mask of this CTA's group in a `cluster` for copies along the `collective`
    dims: bit r set for each CTA of cluster rank r (`%cluster_ctarank`) sharing this CTA's
    coordinates along the other dims."""

    name = "asyncdsl.cluster_collective_mask"

    def __init__(self, collective: Sequence[str], cluster: Sequence[int]):
        super().__init__(properties=_group_props(collective, cluster), result_types=[IndexType()])

    def verify_(self) -> None:
        self.verify_group()


@irdl_op_definition
class ClusterArriveOp(Arrival, _CollectiveGroup):
    """The warpgroup's arrivals (`Arrival`) on `barriers[index]` of every CTA of this CTA's group
    in a `cluster` along the `collective` dims (this CTA included): the CTAs a collective copy
    along those dims multicasts to.  One elected thread issues the remote arrivals."""

    name = "asyncdsl.cluster_arrive"

    def __init__(
        self, barriers: SSAValue, index: SSAValue, count: int, collective: Sequence[str],
        cluster: Sequence[int],
        sync: bool = True,
    ):
        super().__init__(
            operands=[barriers, index],
            properties={
                "count": int_prop(count),
                **_group_props(collective, cluster),
                **({} if sync else {"unsynced": UnitAttr()}),
            },
        )

    def verify_(self) -> None:
        self.verify_group()
        self.verify_count()


@irdl_op_definition
class SmemSliceOp(IRDLOperation):
    """The contiguous run of a shared-memory buffer's bytes that starts `offset` bytes in, seen
    as a buffer of the result's shape (bytes, so that packed sub-byte buffers slice too)."""

    name = "asyncdsl.smem_slice"
    source = operand_def(MemRefType)
    offset = operand_def(IndexType)
    result = result_def(MemRefType)

    def __init__(self, source: SSAValue, offset: SSAValue, shape: Sequence[int]):
        super().__init__(
            operands=[source, offset], result_types=[smem_type(shape, memref_type(source.type).element_type)]
        )

    def verify_(self) -> None:
        if not (is_smem(self.source.type) and is_smem(self.result.type)):
            raise VerifyException("smem_slice takes and gives shared-memory buffers")
        if memref_type(self.source.type).element_type != self.result.type.element_type:
            raise VerifyException("smem_slice keeps the element type")
        if buffer_bytes(self.result.type) > buffer_bytes(self.source.type):
            raise VerifyException(
                f"smem_slice of shape {shape_of(self.result)} does not fit in its source of "
                f"shape {shape_of(self.source)}"
            )


OPERATIONS: tuple[type[Operation], ...] = (ClusterCollectiveMaskOp, ClusterArriveOp, SmemSliceOp)
