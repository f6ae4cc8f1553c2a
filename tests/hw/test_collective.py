"""The algebra of collective loads: groups, multicast masks and the split of a box."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

import asyncdsl as ad
from asyncdsl.hw.collective import CollectiveGroup, collective_group, split_box

CLUSTERS = [
    c for c in itertools.product((1, 2, 4), (1, 2, 4), (1, 2)) if math.prod(c) <= 16 and math.prod(c) > 1
]


def rank_of(cta, cluster) -> int:
    return cta[0] + cta[1] * cluster[0] + cta[2] * cluster[0] * cluster[1]


def every_cta(cluster):
    return [(x, y, z) for z in range(cluster[2]) for y in range(cluster[1]) for x in range(cluster[0])]


@pytest.mark.parametrize(
    "cluster, dims, cta, mask",
    [
        ((2, 1, 1), ("x",), (1, 0, 0), 0b11),
        ((4, 1, 1), ("x",), (2, 0, 0), 0b1111),
        ((2, 2, 1), ("x",), (0, 0, 0), 0b0011),
        ((2, 2, 1), ("x",), (1, 1, 0), 0b1100),
        ((2, 2, 1), ("y",), (0, 1, 0), 0b0101),
        ((2, 2, 1), ("y",), (1, 0, 0), 0b1010),
        ((2, 2, 1), ("x", "y"), (1, 1, 0), 0b1111),
        ((1, 2, 1), ("y",), (0, 1, 0), 0b11),
    ],
)
def test_masks_match_cluster_ranks(cluster, dims, cta, mask):
    assert collective_group(cluster, dims).mask(cta) == mask


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_groups_partition_the_cluster_and_index_their_members(cluster):
    for count in (1, 2):
        for dims in itertools.combinations([d for d, n in zip("xyz", cluster) if n > 1], count):
            group = collective_group(cluster, dims)
            members: dict[int, list] = {}
            for cta in every_cta(cluster):
                mask = group.mask(cta)
                assert mask >> rank_of(cta, cluster) & 1, (cta, dims)
                members.setdefault(mask, []).append(cta)
            covered = 0
            for mask, ctas in members.items():
                assert bin(mask).count("1") == group.size == len(ctas)
                assert covered & mask == 0
                covered |= mask
                # Members agree on every other dim; their indices are 0 .. size-1.
                others = [a for a in range(3) if a not in group.axes]
                assert len({tuple(c[a] for a in others) for c in ctas}) == 1
                assert sorted(group.index(c) for c in ctas) == list(range(group.size))
            assert covered == (1 << math.prod(cluster)) - 1


def test_index_puts_the_first_collective_dim_fastest():
    group = collective_group((2, 2, 1), ("y", "x"))
    assert [group.index(c) for c in every_cta((2, 2, 1))] == [0, 1, 2, 3]
    assert group.dims == ("x", "y")


@pytest.mark.parametrize(
    "box, size, swizzled, part",
    [
        ((64, 64), 2, False, (32, 64)),
        ((64, 64), 4, True, (16, 64)),
        ((1, 64), 2, False, (1, 32)),  # the minor dim may be cut without swizzle
        ((2, 32, 64), 4, False, (1, 16, 64)),  # 2 divides 4: split fully, carry 2 over
        ((1, 2, 8, 64), 4, True, (1, 1, 4, 64)),
        ((8, 3, 64), 4, False, (2, 3, 64)),
    ],
)
def test_split_takes_the_first_divisible_dim_with_carry_over(box, size, swizzled, part):
    assert split_box(box, size, 0, swizzled=swizzled).box == part


@pytest.mark.parametrize(
    "box, size, swizzled", [((1, 64), 2, True), ((6, 64), 4, False), ((3, 4, 32), 2, True)]
)
def test_split_fails_when_nothing_divides(box, size, swizzled):
    with pytest.raises(ad.CopyError, match="can be split among"):
        split_box(box, size, 0, swizzled=swizzled)


@settings(max_examples=examples(200), deadline=None)
@given(
    box=st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 16]), min_size=1, max_size=5),
    size=st.sampled_from([2, 4, 8, 16]),
    swizzled=st.booleans(),
)
def test_parts_tile_the_box_exactly(box, size, swizzled):
    try:
        parts = [split_box(box, size, i, swizzled=swizzled) for i in range(size)]
    except ad.CopyError:
        return
    elements = math.prod(box)
    seen = set()
    for part in parts:
        assert math.prod(part.box) * size == elements
        strides = [math.prod(box[d + 1 :]) for d in range(len(box))]
        # The part is one contiguous run of the row-major box, starting where its offsets say.
        flat = sorted(
            sum((o + i) * s for o, i, s in zip(part.offsets, index, strides))
            for index in itertools.product(*(range(n) for n in part.box))
        )
        assert flat == list(range(part.smem_offset, part.smem_offset + len(flat)))
        seen.update(flat)
    assert seen == set(range(elements))


def test_group_is_plain_data():
    assert CollectiveGroup((2, 2, 1), (0, 1)).base_mask == 0b1111
    assert CollectiveGroup((2, 2, 1), (1,)).shift_axes == (0,)
