"""Collective (multicast) loads in a cluster: which CTAs share a copy and who loads which part.

A collective load names cluster dims (`collective=("x",)`); the CTAs that share their
coordinates along every *other* cluster dim form one group and issue the same copy. Each loads
one part of the box and multicasts it to the whole group, so every member ends up with the whole
box (docs/reference-semantics.md §5).

- `CollectiveGroup.index`: a CTA's position in its group, collective dims in x, y, z order, the
  first fastest (`x + y * cx` for `("x", "y")`).
- `CollectiveGroup.mask`: the multicast mask, bit r for each CTA of cluster rank r in the group,
  ranks numbered as `%cluster_ctarank` numbers them (`x + y * cx + z * cx * cy`).
- `split_box`: the reference's split of the transformed box: the first dim the group size divides
  is cut into equal parts; a smaller dim that divides the remaining count is split fully (one
  element per CTA) and the rest carried to the next dim; with swizzle the minor dim is never cut
  (its rows must stay whole swizzle spans). Nothing divides: CopyError.
- Leader-tracked loads (`partition=`) pair the 2 CTAs along x (Blackwell `cta_group::2`):
  `check_leader_tracked` holds those rules.

Indices are plain ints or traced values (anything with `+ * // %`), as in `asyncdsl.hw.tma`,
so the same code computes the IR of a copy and checks it with numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from asyncdsl.errors import CopyError, UnsupportedTargetError
from asyncdsl.hw.options import BLACKWELL, Arch, Partition
from asyncdsl.hw.transforms import Index

CLUSTER_DIMS = ("x", "y", "z")


@dataclass(frozen=True)
class CollectiveGroup:
    """The CTAs of a `cluster` that share one collective copy along the cluster `axes` (0..2)."""

    cluster: tuple[int, int, int]
    axes: tuple[int, ...]

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(CLUSTER_DIMS[axis] for axis in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.cluster[axis] for axis in self.axes)

    @property
    def rank_strides(self) -> tuple[int, int, int]:
        """How far one step along each cluster dim moves `%cluster_ctarank`."""
        x, y, _ = self.cluster
        return (1, x, x * y)

    @property
    def shift_axes(self) -> tuple[int, ...]:
        """The other cluster dims with more than one CTA: they pick which group a CTA is in."""
        return tuple(a for a in range(3) if a not in self.axes and self.cluster[a] > 1)

    @property
    def base_mask(self) -> int:
        """The mask of the group at coordinate 0 along every other cluster dim."""
        strides = self.rank_strides
        mask = 0
        for position in _positions([self.cluster[a] for a in self.axes]):
            mask |= 1 << sum(p * strides[a] for p, a in zip(position, self.axes))
        return mask

    def index(self, cta_id: Sequence[Index]) -> Index:
        """The position in its group of the CTA at `cta_id` (x, y, z in the cluster)."""
        index: Index = 0
        stride = 1
        for axis in self.axes:
            index = index + cta_id[axis] * stride
            stride *= self.cluster[axis]
        return index

    def mask(self, cta_id: Sequence[int]) -> int:
        """The multicast mask of the group of the CTA at `cta_id`."""
        strides = self.rank_strides
        return self.base_mask << sum(cta_id[a] * strides[a] for a in self.shift_axes)


def _positions(extents: Sequence[int]) -> list[tuple[int, ...]]:
    positions: list[tuple[int, ...]] = [()]
    for extent in extents:
        positions = [(*p, i) for p in positions for i in range(extent)]
    return positions


def collective_group(cluster: Sequence[int], dims: Sequence[str]) -> CollectiveGroup:
    """The group of a copy with `collective=dims` in a kernel of `cluster` (x, y, z extents).

    As in the reference, a named dim along which the cluster has one CTA shares nothing and
    drops out, so one kernel can be compiled for several cluster shapes; a group of one CTA is a
    plain copy.
    """
    x, y, z = cluster
    for dim in dims:
        if dim not in CLUSTER_DIMS:
            raise CopyError(f"collective names cluster dims among {CLUSTER_DIMS}, got {tuple(dims)}")
    axes = sorted(CLUSTER_DIMS.index(d) for d in dims if cluster[CLUSTER_DIMS.index(d)] > 1)
    return CollectiveGroup((x, y, z), tuple(axes))


def check_leader_tracked(group: CollectiveGroup, partition: Partition, arch: Arch) -> None:
    """Raise unless a `partition` ("partitioned"/"replicated") load can be emitted: Blackwell's
    `cta_group::2` forms, which pair the 2 CTAs along x."""
    spelled = "PARTITIONED(axis)" if partition == Partition.PARTITIONED else "REPLICATED"
    if arch != BLACKWELL:
        raise UnsupportedTargetError(
            f"partition=CopyPartition.{spelled} loads use the cta_group::2 TMA forms, which "
            f"Hopper lacks: compile with @asyncdsl.kernel(arch={str(BLACKWELL)!r}) (this "
            f"kernel targets {arch})"
        )
    if group.axes != (0,) or group.size != 2:
        raise CopyError(
            f"partition=CopyPartition.{spelled} pairs the 2 CTAs along x: it needs "
            f"collective='x' in a cluster of 2 along x, got collective={group.dims} in cluster "
            f"{group.cluster}"
        )


@dataclass(frozen=True)
class BoxPart:
    """The part of a box one CTA of a collective group moves.

    `box` is the part's shape (array order), `offsets` what to add to the box's coordinates per
    dim, and `smem_offset` the byte at which the part starts in the SMEM box (row-major).
    """

    box: tuple[int, ...]
    offsets: tuple[Index, ...]
    smem_offset: Index


def split_box(
    box: Sequence[int], group_size: int, index: Index, *, swizzled: bool, element_bytes: int = 1
) -> BoxPart:
    """The part of `box` (of `element_bytes`-byte elements) the CTA at position `index` of a
    group of `group_size` CTAs loads."""
    box = tuple(box)
    part = list(box)
    offsets: list[Index] = [0] * len(box)
    smem_offset: Index = 0
    remaining = group_size
    for dim in range(len(box) - 1 if swizzled else len(box)):
        size = box[dim]
        row_bytes = math.prod(box[dim + 1:]) * element_bytes
        if size % remaining == 0:
            part[dim] = size // remaining
            offsets[dim] = index * part[dim]
            smem_offset = smem_offset + index * (part[dim] * row_bytes)
            remaining = 1
            break
        if remaining % size:
            break
        if size > 1:  # a dim of 1 (a squeezed one) has nothing to share
            part[dim] = 1
            offsets[dim] = index % size
            smem_offset = smem_offset + offsets[dim] * row_bytes
            index = index // size
        remaining //= size
    if remaining > 1:
        minor = " (the minor dim, whose rows must stay whole swizzle spans, excluded)" if swizzled else ""
        raise CopyError(
            f"no dim of the transformed box {box}{minor} can be split among the {group_size} "
            f"CTAs of the collective: the first dim the CTA count divides is cut into equal "
            "parts, and a smaller dim only carries over when its size divides the CTAs left"
        )
    return BoxPart(tuple(part), tuple(offsets), smem_offset)
