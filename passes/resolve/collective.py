"""Resolving a collective copy (`collective=`) into one TMA load that `partition-collectives`
will split among the CTAs of the cluster.

Only the TMA engine multicasts, so any other `implementation` is refused here. Cluster dims of
one CTA drop out of the collective (a copy left with none is an ordinary copy, resolved as one);
leader-tracked copies (`partition=`) are checked against the Blackwell `cta_group::2` rules.

A `CopyPartition.PARTITIONED(axis)` copy is split here, before the transforms, as the reference
splits it: the pair's CTA at x = c loads the c-th half of the slice along `axis` (counted over
the dims that are not squeezed) into its SMEM buffer, which has the shape of that half. Every
other collective copy is planned for the whole slice; `partition-collectives` cuts the
transformed box, since only there is the order in which the data lands in SMEM known.

Example: with `cluster=(2, 1, 1)`, `async_copy(x.at[ds(r, 128), :], buf, barrier=bar,
collective="x")` becomes `asyncdsl.tma_load` of the 128-row box with `collective = ["x"]`.
"""

from __future__ import annotations

from xdsl.rewriter import Rewriter

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.option_attrs import eviction_of
from asyncdsl.errors import CopyError
from asyncdsl.hw.collective import CollectiveGroup, check_leader_tracked, collective_group
from asyncdsl.hw.options import Implementation, Partition
from asyncdsl.passes.resolve.copy_operands import argument_index, enclosing_kernel, load_barrier
from asyncdsl.passes.resolve.index_builder import IndexBuilder, slice_entries
from asyncdsl.passes.resolve.tma import plan_copy


def is_collective(copy: ir.AsyncCopyOp) -> bool:
    """Whether `copy` shares its data with other CTAs: it names cluster dims along which the
    kernel's cluster has more than one CTA, or asks for a leader-tracked partition."""
    if not copy.cluster_dims:
        return False
    if copy.partition is not None:
        return True
    cluster = attrs.dims(enclosing_kernel(copy), attrs.CLUSTER)
    return collective_group(cluster, copy.cluster_dims).size > 1


def resolve_collective_copy(copy: ir.AsyncCopyOp) -> ir.TmaLoadOp:
    """Replace the collective `copy` by one TMA load carrying its collective (returned)."""
    if copy.implementation.data != Implementation.TMA:
        raise CopyError(
            f"collective copies multicast through TMA: implementation={copy.implementation.data!r} "
            "cannot be collective"
        )
    kernel = enclosing_kernel(copy)
    group = collective_group(attrs.dims(kernel, attrs.CLUSTER), copy.cluster_dims)
    partition = copy.partition.data if copy.partition is not None else None
    if partition is not None:
        check_leader_tracked(group, partition, attrs.arch(kernel))
    builder = IndexBuilder(copy)
    entries = slice_entries(copy.starts, copy.sizes, builder)
    if partition == Partition.PARTITIONED:
        assert copy.partition_axis is not None, "a partitioned copy names its axis (verified)"
        entries = _own_half(entries, copy.partition_axis.value.data, group, builder)
    plan = plan_copy(copy, entries)
    load = ir.TmaLoadOp(
        copy.smem,
        [builder.value(c) for c in plan.coords],
        *load_barrier(copy),
        TmaDescriptorAttr.from_spec(plan.tensor_map_spec(argument_index(copy.gmem))),
        plan.box_bytes if copy.arrive.value.data else 0,
        predicate=copy.predicate,
        collective=copy.cluster_dims,
        partition=partition,
        eviction=eviction_of(copy),
    )
    load.location = copy.location
    Rewriter.replace_op(copy, load, new_results=[])
    return load


def cluster_cta_ids(builder: IndexBuilder, group: CollectiveGroup) -> list:
    """This CTA's coordinates in the cluster, read (in IR before the builder's op) along the
    group's dims; the others are never used."""
    return [
        builder.wrap(builder.emit(ir.ClusterCtaIdOp(axis))) if axis in group.axes else 0
        for axis in range(3)
    ]


def _own_half(entries: list, axis: int, group: CollectiveGroup, builder: IndexBuilder) -> list:
    """The slice entries of this CTA's part of a partitioned copy along `axis`."""
    windows = [dim for dim, entry in enumerate(entries) if type(entry) is tuple]
    if not 0 <= axis < len(windows):
        raise CopyError(
            f"PARTITIONED(axis={axis}) needs an axis among the slice's {len(windows)} dims that "
            "are not squeezed"
        )
    dim = windows[axis]
    start, size = entries[dim]
    if size % group.size:
        raise CopyError(
            f"PARTITIONED(axis={axis}) splits the slice's dim {dim} of size {size} among the "
            f"{group.size} CTAs of the pair, but {group.size} does not divide {size}"
        )
    part = size // group.size
    index = group.index(cluster_cta_ids(builder, group))
    entries = list(entries)
    entries[dim] = (start + index * part, part)
    return entries
