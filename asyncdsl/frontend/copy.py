"""Asynchronous copies in kernel code: `async_copy` between a GMEM slice and an SMEM buffer,
and waiting for them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.transform_attrs import transform_attr
from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.options import cluster_dims, flag, option, swizzle_bytes, transform_chain
from asyncdsl.frontend.refs import GmemIndexed, GmemRef, GmemView, SmemRef
from asyncdsl.frontend.scalars import Scalar, condition_value, index_value
from asyncdsl.frontend.sync import Barrier
from asyncdsl.hw.options import Eviction, Implementation, Oob, Partition, Reduction
from asyncdsl.hw.smem_layout import describe_chain
from asyncdsl.hw.transforms import MemRefTransform


@dataclass(frozen=True)
class Partitioned:
    """Each CTA of the collective loads its own part along `axis`; the leader tracks all bytes."""

    axis: int


class CopyPartition:
    """How a collective load is split among the CTAs of a cluster (Blackwell `cta_group::2`)."""

    REPLICATED = Partition.REPLICATED

    @staticmethod
    def PARTITIONED(axis: int) -> Partitioned:  # noqa: N802 - mirrors the reference system's API
        return Partitioned(axis)


def _as_gmem_view(side: object, name: str) -> GmemView | SmemRef:
    if isinstance(side, GmemRef):
        return side.whole()
    if isinstance(side, (GmemView, SmemRef)):
        return side
    if isinstance(side, GmemIndexed):
        raise TraceError(
            f"async_copy {name}: an array indexed by register tiles is a gather or a scatter, which "
            "asyncdsl.load and asyncdsl.store move element by element; the copy engine moves windows "
            "(x.at[ad.ds(row, n), :])", user_location(),
        )
    raise TraceError(
        f"async_copy {name} must be a kernel array argument (optionally .at[...]) or an "
        f"asyncdsl.smem buffer, got {type(side).__name__}",
        user_location(),
    )


def _copy_layout(smem: SmemRef, transforms, swizzle) -> tuple[tuple[MemRefTransform, ...], int]:
    """The transforms and swizzle of a copy to or from `smem`: the buffer's when it carries a
    layout (the copy may repeat them, not change them), else the copy's own."""
    given_chain = None if transforms is None else transform_chain(transforms)
    given_swizzle = None if swizzle is None else swizzle_bytes(swizzle)
    layout = smem.layout
    if layout is None:
        return given_chain or (), given_swizzle or 0
    if (given_chain is not None and given_chain != layout.transforms) or (
        given_swizzle is not None and given_swizzle != layout.swizzle_bytes
    ):
        passed = describe_chain(given_chain if given_chain is not None else layout.transforms)
        passed_swizzle = given_swizzle if given_swizzle is not None else layout.swizzle_bytes
        raise TraceError(
            f"async_copy passes transforms {passed} and swizzle {passed_swizzle}, but the buffer allocated "
            f"at {smem.origin} carries transforms {describe_chain(layout.transforms)} and swizzle "
            f"{layout.swizzle_bytes}; leave them off the copy, which takes the buffer's",
            user_location(),
        )
    return layout.transforms, layout.swizzle_bytes


def async_copy(
    src,
    dst,
    *,
    barrier: Barrier | None = None,
    swizzle: int | None = None,
    transforms: MemRefTransform | Sequence[MemRefTransform] | None = None,
    arrive: bool = True,
    collective: str | Sequence[str] | None = None,
    partition: Partitioned | str | None = None,
    predicate: Scalar | None = None,
    reduction: str | None = None,
    implementation: str = "tma",
    oob: str = "zeros",
    eviction_policy: str | None = None,
) -> None:
    """Start an asynchronous copy between a GMEM slice and an SMEM buffer.

    A buffer allocated with transforms or a swizzle (`asyncdsl.smem(..., transforms=, swizzle=)`)
    lends them to the copy, and the GMEM slice has its logical shape; a copy that passes other
    ones is an error.  Otherwise the copy's own `transforms` and `swizzle` lay the slice out
    in the buffer (which then has the transformed shape).

    GMEM -> SMEM copies complete on `barrier` (its phase completes once the bytes land; `arrive`
    also makes the warpgroup arrive with expect-tx of those bytes): each copy is one arrival, so
    two copies that one wait covers need `asyncdsl.barrier(arrival_count=2)` (see
    `asyncdsl.barrier` for the check made while tracing). SMEM -> GMEM copies join the
    warpgroup's bulk group; wait for them with `await_async_copy`.

    `oob` says what a slice past the array's edge gives: "zeros" (the default) zero-fills
    through a TMA tensor map; "undefined" and "promise_in_bounds" let a slice that is one
    contiguous run move as a plain bulk copy (any length, no tensor map), clamped at the end of
    the array under "undefined" (the barrier still completes; SMEM past the clamp keeps what it
    held). `implementation="cp_async"` copies GMEM -> SMEM with every thread's `cp.async`
    (plain, or 2-D tiled and swizzled like TMA); with a barrier it counts as one arrival of the
    warpgroup, as a TMA load does (`arrive=False`: none, the user arrives), and without one it
    joins the warpgroup's cp.async group, which `await_cp_async_copy` waits for. cp.async writes
    through the generic proxy: call `fence_async_smem` before a TMA or bulk copy uses the bytes.

    `collective` ("x", "y", "z" or a tuple of them, declared in the kernel's `cluster=`) makes a
    GMEM -> SMEM copy shared by the CTAs that agree on the other cluster dims: every one of them
    issues the same copy, loads one part and multicasts it, and each ends up with the whole slice
    on its own barrier (which expects the whole slice). `partition=CopyPartition.PARTITIONED(axis)`
    (each CTA of an x-pair gets its half along `axis`) and `CopyPartition.REPLICATED` (both get
    everything) track the pair's bytes on the barrier of the CTA at x = 0 only: Blackwell
    `cta_group::2` forms, for kernels with `arch="sm_100a"`.

    `reduction` ("add", "min", "max", "umin", "umax", "smin", "smax", "inc", "dec", "and", "or",
    "xor") makes an SMEM -> GMEM copy combine each element with the one in GMEM; which dtypes
    each op takes is `asyncdsl.hw.reduction.ALLOWED`. `predicate` (a traced condition) limits
    the copy to the warpgroups where it holds; a skipped store still closes its bulk group.
    A side may be a peer device's array (`x.peer(pe)`, in a kernel run on several devices):
    the copy then moves through tiled TMA, never collective.
    `eviction_policy` ("evict_first", "evict_last") asks L2 to keep a TMA load's lines for a
    shorter or longer time than others (`cache_hint`): "evict_first" for slices read once, which
    then give way first, to the dirty lines an earlier kernel left among them too (a few-tile GEMM
    on the H200 reading b after a kernel that wrote 256 MB: 1.06-1.12x cuBLAS against 0.91-0.97x,
    docs/hardware.md §18).  It changes no byte copied; stores, cp.async and plain bulk copies
    refuse it.
    `arrive=False` leaves a load's expect-tx to the user (`bar.arrive_expect_tx(n)`) and a
    store's bulk group open, for a later store to close.
    """
    tracer = tracing.current("asyncdsl.async_copy")
    src, dst = _as_gmem_view(src, "source"), _as_gmem_view(dst, "destination")
    if isinstance(src, GmemView) == isinstance(dst, GmemView):
        raise TraceError("async_copy copies between GMEM and SMEM: give one array slice and one smem buffer",
                         user_location())
    gmem = src if isinstance(src, GmemView) else dst
    if barrier is not None and not isinstance(barrier, Barrier):
        raise TraceError(f"barrier must come from asyncdsl.barrier(...), got {barrier!r}", user_location())
    transforms, swizzle = _copy_layout(src if isinstance(src, SmemRef) else dst, transforms, swizzle)
    collective = cluster_dims(collective)
    arrive = flag(arrive, "arrive")
    partition_kind: Partition | None
    if isinstance(partition, Partitioned):
        partition_kind, partition_axis = Partition.PARTITIONED, partition.axis
    else:
        partition_kind = None if partition is None else option(Partition, partition, "partition")
        partition_axis = None
    if predicate is not None and not (isinstance(predicate, Scalar) and predicate.is_condition):
        raise TraceError("predicate must be a traced condition (e.g. asyncdsl.program_id(0) == 0)",
                         user_location())
    barrier_operands = barrier.operands() if barrier is not None else (None, None)
    peer = gmem.ref.peer_index
    op = ir.AsyncCopyOp(
        src.value if isinstance(src, SmemRef) else gmem.ref.argument,
        dst.value if isinstance(dst, SmemRef) else gmem.ref.argument,
        [index_value(d.start) for d in gmem.dims],
        [-1 if d.size is None else d.size for d in gmem.dims],
        barriers=barrier_operands[0],
        barrier_index=barrier_operands[1],
        predicate=condition_value(predicate) if predicate is not None else None,
        transforms=[transform_attr(t) for t in transforms],
        swizzle=swizzle,
        arrive=arrive,
        collective=collective,
        partition=partition_kind,
        partition_axis=partition_axis,
        reduction=None if reduction is None else option(Reduction, reduction, "reduction"),
        implementation=option(Implementation, implementation, "implementation"),
        oob=option(Oob, oob, "oob"),
        peer=None if peer is None else index_value(peer),
        eviction=None if eviction_policy is None else option(Eviction, eviction_policy, "eviction_policy"),
    )
    tracer.emit(op)


def await_async_copy(allow_groups: int = 0, read_only: bool = False) -> None:
    """Wait until at most `allow_groups` of this warpgroup's SMEM -> GMEM copy groups are still
    pending; with `read_only`, only until their SMEM sources may be overwritten."""
    _check_groups(allow_groups, "asyncdsl.await_async_copy")
    read_only = flag(read_only, "asyncdsl.await_async_copy: read_only")
    tracing.current("asyncdsl.await_async_copy").emit(ir.AwaitAsyncCopyOp(allow_groups, read_only))


def await_cp_async_copy(allow_groups: int = 0) -> None:
    """Wait until at most `allow_groups` of this warpgroup's cp.async groups (GMEM -> SMEM
    copies with `implementation="cp_async"` and no barrier) are still pending, then sync the
    warpgroup so that every thread sees every thread's chunks."""
    _check_groups(allow_groups, "asyncdsl.await_cp_async_copy")
    tracing.current("asyncdsl.await_cp_async_copy").emit(ir.AwaitCpAsyncCopyOp(allow_groups))


def _check_groups(allow_groups, what: str) -> None:
    """A Python int (the op's verifier checks its range)."""
    if not is_int(allow_groups):
        raise TraceError(f"{what}: allow_groups (how many copy groups may stay pending) must be a Python "
                         f"int, got {allow_groups!r}", user_location())
