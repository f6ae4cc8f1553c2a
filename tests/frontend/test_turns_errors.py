"""Turn-taking the hardware cannot do fails while tracing with a TraceError at the user's line:
warpgroups that are not consecutive or not in the CTA, turns allocated inside a role, a turn
taken by a warpgroup outside the group or inside a turn of its own, and more groups than the
CTA has named barriers for."""

from __future__ import annotations

import pytest
from support import expect

import asyncdsl as ad

SPEC = (ad.ArraySpec((128, 64), ad.float32),)


@pytest.mark.parametrize("warpgroups", [(0,), (0, 2), (1, 0), [0, True], 3])
def test_turns_take_two_or_more_consecutive_warpgroups(warpgroups):
    @ad.kernel(block=384)
    def kernel(x):
        ad.turns(warpgroups)  # the group

    expect(ad.TraceError, kernel, SPEC, {}, "two or more consecutive warpgroup indices",
           line_text="the group")


def test_turns_name_warpgroups_of_the_cta():
    @ad.kernel(block=256)
    def kernel(x):
        ad.turns((1, 2))  # the group

    expect(ad.TraceError, kernel, SPEC, {}, "the CTA has warpgroups 0..1", line_text="the group")


def test_turns_are_allocated_outside_roles():
    @ad.kernel(block=256)
    def kernel(x):
        with ad.warpgroup_role((0, 1)):
            ad.turns((0, 1))  # the group

    expect(ad.TraceError, kernel, SPEC, {}, "outside any warpgroup_role", line_text="the group")


@pytest.mark.parametrize("role", [None, (2,), (1, 2)])
def test_a_turn_is_taken_by_the_warpgroups_of_the_group(role):
    @ad.kernel(block=384)
    def kernel(x):
        turns = ad.turns((0, 1))
        if role is None:
            with turns.turn():  # outside roles
                pass
        else:
            with ad.warpgroup_role(role), turns.turn():  # in a role
                pass

    line = "outside roles" if role is None else "in a role"
    expect(ad.TraceError, kernel, SPEC, {}, "only warpgroups (0, 1) take these turns", line_text=line)


def test_a_turn_inside_a_turn_of_the_same_group_would_wait_for_itself():
    @ad.kernel(block=256)
    def kernel(x):
        turns = ad.turns((0, 1))
        with ad.warpgroup_role((0, 1)), turns.turn():  # noqa: SIM117 - a line of its own for the nested one
            with turns.turn():  # the inner turn
                pass

    expect(ad.TraceError, kernel, SPEC, {}, "would wait for itself", line_text="the inner turn")


def test_a_cta_has_sixteen_named_barriers():
    @ad.kernel(block=512)  # bar.sync 0 and 4 warpgroups' own: 11 left, 5 groups of 2 take 10
    def kernel(x):
        for _ in range(5):
            ad.turns((2, 3))
        ad.turns((0, 1))  # the sixth group

    expect(ad.TraceError, kernel, SPEC, {}, "needs 2 more named barriers, but a CTA has 16",
           line_text="the sixth group")
