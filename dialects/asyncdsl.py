"""The `asyncdsl` dialect: shared memory, mbarriers and asynchronous copies.

Two levels of copy ops live here:

- `asyncdsl.async_copy` is what the user wrote: a GMEM slice (starts + sizes, -1 marking a squeezed
  dim), a chain of transforms, swizzle, barrier and every knob of the reference system.
- `asyncdsl.tma_load` / `asyncdsl.tma_store` are what the hardware does: a TMA descriptor (as the
  host will encode it), coordinates in the descriptor's dims, a box landing in SMEM.
  `resolve-transforms` rewrites the first into the second.

Verifiers check what can be checked locally; the frontend runs them as each op is built and
reports failures at the user's source line, so the rules live in one place.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from asyncdsl import dtypes
from asyncdsl.dialects.asyncdsl_attrs import (
    ATTRIBUTES,
    SMEM,
    BarriersType,
    SharedMemorySpaceAttr,
    TmaDescriptorAttr,
)
from asyncdsl.dialects.transform_attrs import TRANSFORM_ATTRS

SWIZZLE_BYTES = (0, 32, 64, 128)
IMPLEMENTATIONS = ("tma", "cp_async")
OOB_MODES = ("zeros", "undefined", "promise_in_bounds")
CLUSTER_DIMS = ("x", "y", "z")
REDUCTIONS = ("add", "min", "max", "umin", "umax", "smin", "smax", "inc", "dec", "and", "or", "xor")


def int_prop(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


def bool_prop(value: bool) -> BoolAttr:
    return IntegerAttr(int(value), i1)


def is_smem(type_: Attribute) -> bool:
    return isinstance(type_, MemRefType) and isinstance(type_.memory_space, SharedMemorySpaceAttr)


def is_gmem(type_: Attribute) -> bool:
    return isinstance(type_, MemRefType) and not is_smem(type_)


def smem_type(shape: Sequence[int], element_type: Attribute) -> MemRefType:
    return MemRefType(element_type, list(shape), memory_space=SMEM)


def shape_of(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, MemRefType)
    return tuple(value.type.get_shape())


def element_bits(type_: MemRefType) -> int:
    return dtypes.from_mlir(type_.element_type).bits


def buffer_bytes(type_: MemRefType) -> int:
    count = 1
    for d in type_.get_shape():
        count *= d
    return count * element_bits(type_) // 8


# ---------------------------------------------------------------------------------------------
# Identifiers of the running program.


class _AxisIdOp(IRDLOperation):
    axis = prop_def(IntegerAttr)
    result = result_def(IndexType)

    def __init__(self, axis: int):
        super().__init__(properties={"axis": int_prop(axis)}, result_types=[IndexType()])

    def verify_(self) -> None:
        if self.axis.value.data not in (0, 1, 2):
            raise VerifyException(f"axis must be 0, 1 or 2, got {self.axis.value.data}")


@irdl_op_definition
class ProgramIdOp(_AxisIdOp):
    """Index of this CTA in the grid along `axis` (`%ctaid`)."""

    name = "asyncdsl.program_id"


@irdl_op_definition
class NumProgramsOp(_AxisIdOp):
    """Number of CTAs in the grid along `axis` (`%nctaid`)."""

    name = "asyncdsl.num_programs"


@irdl_op_definition
class ClusterCtaIdOp(_AxisIdOp):
    """Index of this CTA inside its cluster along `axis` (`%cluster_ctaid`)."""

    name = "asyncdsl.cluster_cta_id"


@irdl_op_definition
class ClusterIdOp(_AxisIdOp):
    """Index of this CTA's cluster in the grid along `axis` (`%clusterid`)."""

    name = "asyncdsl.cluster_id"


@irdl_op_definition
class WarpgroupIdxOp(IRDLOperation):
    """Index of the executing warpgroup inside its CTA (0 for `block=128`)."""

    name = "asyncdsl.warpgroup_idx"
    result = result_def(IndexType)

    def __init__(self):
        super().__init__(result_types=[IndexType()])


# ---------------------------------------------------------------------------------------------
# Shared memory and barriers.


@irdl_op_definition
class AllocSmemOp(IRDLOperation):
    """A shared-memory buffer of the CTA. `allocate-smem` fills in `offset`."""

    name = "asyncdsl.alloc_smem"
    alignment = prop_def(IntegerAttr)
    offset = opt_prop_def(IntegerAttr)
    result = result_def(MemRefType)

    def __init__(self, shape: Sequence[int], element_type: Attribute, alignment: int = 128):
        super().__init__(
            properties={"alignment": int_prop(alignment)},
            result_types=[smem_type(shape, element_type)],
        )

    def verify_(self) -> None:
        if not is_smem(self.result.type):
            raise VerifyException("alloc_smem must produce a memref in #asyncdsl.smem")
        alignment = self.alignment.value.data
        if alignment < 16 or alignment & (alignment - 1):
            raise VerifyException(f"alignment must be a power of two >= 16, got {alignment}")
        if any(d <= 0 for d in shape_of(self.result)):
            raise VerifyException(f"shared-memory buffers need positive dims, got {shape_of(self.result)}")


@irdl_op_definition
class AllocBarriersOp(IRDLOperation):
    """`count` mbarriers, each initialised with `arrival_count` before the kernel body runs."""

    name = "asyncdsl.alloc_barriers"
    arrival_count = prop_def(IntegerAttr)
    offset = opt_prop_def(IntegerAttr)
    result = result_def(BarriersType)

    def __init__(self, count: int, arrival_count: int):
        super().__init__(
            properties={"arrival_count": int_prop(arrival_count)},
            result_types=[BarriersType(count)],
        )

    def verify_(self) -> None:
        count = self.result.type.count.data
        arrivals = self.arrival_count.value.data
        if not 1 <= count <= 32:
            raise VerifyException(f"a barrier group holds 1 to 32 barriers, got {count}")
        if not 1 <= arrivals < 2**20:
            raise VerifyException(f"arrival_count must be in [1, 2^20 - 1], got {arrivals}")


@irdl_op_definition
class SmemViewOp(IRDLOperation):
    """The sub-buffer of a shared-memory buffer selected by integer indices on its leading dims."""

    name = "asyncdsl.smem_view"
    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(MemRefType)

    def __init__(self, source: SSAValue, indices: Sequence[SSAValue]):
        shape = shape_of(source)[len(indices):]
        super().__init__(
            operands=[source, indices],
            result_types=[smem_type(shape, source.type.element_type)],
        )

    def verify_(self) -> None:
        if not is_smem(self.source.type):
            raise VerifyException("smem_view takes a shared-memory buffer")
        source_shape = shape_of(self.source)
        if len(self.indices) >= len(source_shape):
            raise VerifyException(
                f"smem_view indexes leading dims only: {len(self.indices)} indices for a "
                f"{len(source_shape)}-d buffer would leave nothing"
            )
        if shape_of(self.result) != source_shape[len(self.indices):]:
            raise VerifyException("smem_view result shape must be the source's trailing dims")


@irdl_op_definition
class ArriveOp(IRDLOperation):
    """The warpgroup arrives `count` times on barrier `barriers[index]` (one elected thread)."""

    name = "asyncdsl.arrive"
    barriers = operand_def(BarriersType)
    index = operand_def(IndexType)
    count = prop_def(IntegerAttr)

    def __init__(self, barriers: SSAValue, index: SSAValue, count: int = 1):
        super().__init__(operands=[barriers, index], properties={"count": int_prop(count)})

    def verify_(self) -> None:
        if self.count.value.data < 1:
            raise VerifyException(f"arrive count must be positive, got {self.count.value.data}")


@irdl_op_definition
class ArriveExpectTxOp(IRDLOperation):
    """One arrival plus `bytes` expected transaction bytes on `barriers[index]`."""

    name = "asyncdsl.arrive_expect_tx"
    barriers = operand_def(BarriersType)
    index = operand_def(IndexType)
    bytes = prop_def(IntegerAttr)

    def __init__(self, barriers: SSAValue, index: SSAValue, num_bytes: int):
        super().__init__(operands=[barriers, index], properties={"bytes": int_prop(num_bytes)})

    def verify_(self) -> None:
        if not 0 <= self.bytes.value.data < 2**20:
            raise VerifyException(f"expect-tx bytes must be in [0, 2^20), got {self.bytes.value.data}")


@irdl_op_definition
class WaitOp(IRDLOperation):
    """Every thread of the warpgroup waits for a phase of `barriers[index]` to complete.

    Without `parity`, the phase is tracked for the user: each wait of a warpgroup on a barrier
    waits for the phase after the one its previous wait on that barrier saw.
    """

    name = "asyncdsl.wait"
    barriers = operand_def(BarriersType)
    index = operand_def(IndexType)
    parity = opt_operand_def(IndexType)

    def __init__(self, barriers: SSAValue, index: SSAValue, parity: SSAValue | None = None):
        super().__init__(operands=[barriers, index, [parity] if parity is not None else []])


# ---------------------------------------------------------------------------------------------
# The user-level copy.


@irdl_op_definition
class AsyncCopyOp(IRDLOperation):
    """An asynchronous copy between a GMEM slice and a whole SMEM buffer, as the user wrote it.

    `starts` has one index per GMEM dim; `slice_sizes[d]` is the window size along dim d or -1
    when the dim is squeezed (indexed by `starts[d]` and dropped). `transforms` rearrange the
    slice on its way to SMEM. Loads (GMEM -> SMEM) complete on `barriers[barrier_index]`; stores
    join the issuing warpgroup's bulk group.
    """

    name = "asyncdsl.async_copy"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    source = operand_def(MemRefType)
    destination = operand_def(MemRefType)
    starts = var_operand_def(IndexType)
    barriers = opt_operand_def(BarriersType)
    barrier_index = opt_operand_def(IndexType)
    predicate = opt_operand_def(IntegerType)

    slice_sizes = prop_def(DenseArrayBase)
    transforms = prop_def(ArrayAttr)
    swizzle = prop_def(IntegerAttr)
    arrive = prop_def(IntegerAttr)
    collective = prop_def(ArrayAttr)
    partition = opt_prop_def(StringAttr)  # "replicated" or "partitioned"
    partition_axis = opt_prop_def(IntegerAttr)
    reduction = opt_prop_def(StringAttr)
    implementation = prop_def(StringAttr)
    oob = prop_def(StringAttr)

    def __init__(
        self,
        source: SSAValue,
        destination: SSAValue,
        starts: Sequence[SSAValue],
        slice_sizes: Sequence[int],
        *,
        barriers: SSAValue | None = None,
        barrier_index: SSAValue | None = None,
        predicate: SSAValue | None = None,
        transforms: Sequence[Attribute] = (),
        swizzle: int = 0,
        arrive: bool = True,
        collective: Sequence[str] = (),
        partition: str | None = None,
        partition_axis: int | None = None,
        reduction: str | None = None,
        implementation: str = "tma",
        oob: str = "zeros",
    ):
        properties: dict[str, Attribute] = {
            "slice_sizes": DenseArrayBase.from_list(i64, list(slice_sizes)),
            "transforms": ArrayAttr(transforms),
            "swizzle": int_prop(swizzle),
            "arrive": bool_prop(arrive),
            "collective": ArrayAttr(StringAttr(d) for d in collective),
            "implementation": StringAttr(implementation),
            "oob": StringAttr(oob),
        }
        if partition is not None:
            properties["partition"] = StringAttr(partition)
        if partition_axis is not None:
            properties["partition_axis"] = int_prop(partition_axis)
        if reduction is not None:
            properties["reduction"] = StringAttr(reduction)
        optional = lambda v: [v] if v is not None else []  # noqa: E731
        super().__init__(
            operands=[
                source, destination, starts,
                optional(barriers), optional(barrier_index), optional(predicate),
            ],
            properties=properties,
        )

    # Derived views used by passes and the interpreter.
    @property
    def is_load(self) -> bool:
        return is_gmem(self.source.type)

    @property
    def gmem(self) -> SSAValue:
        return self.source if self.is_load else self.destination

    @property
    def smem(self) -> SSAValue:
        return self.destination if self.is_load else self.source

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.slice_sizes.get_values())

    @property
    def cluster_dims(self) -> tuple[str, ...]:
        return tuple(d.data for d in self.collective)

    def verify_(self) -> None:
        src, dst = self.source.type, self.destination.type
        if not ((is_gmem(src) and is_smem(dst)) or (is_smem(src) and is_gmem(dst))):
            raise VerifyException("async_copy copies between GMEM and SMEM: exactly one side must be each")
        if src.element_type != dst.element_type:
            raise VerifyException(
                f"async_copy needs the same element type on both sides, got {src.element_type} "
                f"and {dst.element_type}"
            )
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
        if self.implementation.data not in IMPLEMENTATIONS:
            raise VerifyException(f"implementation must be one of {IMPLEMENTATIONS}, got {self.implementation.data!r}")
        if self.oob.data not in OOB_MODES:
            raise VerifyException(f"oob must be one of {OOB_MODES}, got {self.oob.data!r}")
        if (self.barriers is None) != (self.barrier_index is None):
            raise VerifyException("a barrier needs both the barrier group and the index")
        dims = self.cluster_dims
        if any(d not in CLUSTER_DIMS for d in dims) or len(set(dims)) != len(dims):
            raise VerifyException(f"collective must name distinct cluster dims among {CLUSTER_DIMS}, got {dims}")
        if self.is_load:
            if self.barriers is None and self.implementation.data == "tma":
                raise VerifyException("a GMEM -> SMEM copy needs a barrier to complete on (barrier=...)")
            if self.reduction is not None:
                raise VerifyException("reductions apply to SMEM -> GMEM copies only")
        else:
            if self.barriers is not None:
                raise VerifyException(
                    "SMEM -> GMEM copies take no barrier: they complete through await_async_copy"
                )
            if dims:
                raise VerifyException("only GMEM -> SMEM copies can be collective")
        if self.reduction is not None and self.reduction.data not in REDUCTIONS:
            raise VerifyException(f"reduction must be one of {REDUCTIONS}, got {self.reduction.data!r}")
        if self.partition is not None:
            if self.partition.data not in ("partitioned", "replicated"):
                raise VerifyException(f"partition must be 'partitioned' or 'replicated', got {self.partition.data!r}")
            if not dims:
                raise VerifyException("only collective loads can be partitioned or replicated")
            if (self.partition.data == "partitioned") != (self.partition_axis is not None):
                raise VerifyException("a partitioned copy names exactly one axis (and a replicated one none)")


@irdl_op_definition
class AwaitAsyncCopyOp(IRDLOperation):
    """Wait until at most `allow_groups` bulk groups of this warpgroup are pending (with
    `read_only`, only until their SMEM sources may be reused), then sync the warpgroup."""

    name = "asyncdsl.await_async_copy"
    allow_groups = prop_def(IntegerAttr)
    read_only = prop_def(IntegerAttr)

    def __init__(self, allow_groups: int = 0, read_only: bool = False):
        super().__init__(properties={"allow_groups": int_prop(allow_groups), "read_only": bool_prop(read_only)})

    def verify_(self) -> None:
        if not 0 <= self.allow_groups.value.data <= 63:
            raise VerifyException(f"allow_groups must be in [0, 63], got {self.allow_groups.value.data}")


@irdl_op_definition
class FenceAsyncSmemOp(IRDLOperation):
    """Make this warpgroup's ordinary SMEM writes visible to the async proxy (TMA, wgmma),
    then sync the warpgroup (`fence.proxy.async.shared::cta` + warpgroup barrier)."""

    name = "asyncdsl.fence_async_smem"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class WarpgroupBarrierOp(IRDLOperation):
    """All 128 threads of the warpgroup meet."""

    name = "asyncdsl.warpgroup_barrier"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class CtaBarrierOp(IRDLOperation):
    """All threads of the CTA meet (`bar.sync 0`)."""

    name = "asyncdsl.cta_barrier"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class ClusterBarrierOp(IRDLOperation):
    """All threads of every CTA in the cluster meet."""

    name = "asyncdsl.cluster_barrier"

    def __init__(self):
        super().__init__()


# ---------------------------------------------------------------------------------------------
# Hardware-level copies (after resolve-transforms).


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


OPERATIONS: tuple[type[Operation], ...] = (
    ProgramIdOp, NumProgramsOp, ClusterCtaIdOp, ClusterIdOp, WarpgroupIdxOp,
    AllocSmemOp, AllocBarriersOp, SmemViewOp,
    ArriveOp, ArriveExpectTxOp, WaitOp,
    AsyncCopyOp, AwaitAsyncCopyOp, FenceAsyncSmemOp,
    WarpgroupBarrierOp, CtaBarrierOp, ClusterBarrierOp,
    TmaLoadOp, TmaStoreOp,
)

AsyncDSL = Dialect("asyncdsl", list(OPERATIONS), [*ATTRIBUTES, *TRANSFORM_ATTRS])
