"""Warpgroup roles and cluster-wide arrivals the hardware cannot do fail while tracing, with a
TraceError that states the rule (and the register arithmetic) at the user's line."""

from __future__ import annotations

import pytest
from support import expect

import asyncdsl as ad

SPEC = (ad.ArraySpec((128, 64), ad.float32),)


def roles_kernel(first, second, block=384):
    """Two roles: (warpgroups, registers) each."""

    @ad.kernel(block=block)
    def kernel(x):
        with ad.warpgroup_role(first[0], registers=first[1]):  # the first role
            ad.warpgroup_barrier()
        with ad.warpgroup_role(second[0], registers=second[1]):  # the second role
            ad.warpgroup_barrier()

    return kernel


def test_budget_over_the_cta_shows_the_sum_at_the_last_role():
    kernel = roles_kernel((0, 40), ((1, 2), 240))
    expect(ad.TraceError, kernel, SPEC, {}, "40*1 + 240*2 = 520 > 168*3 = 504", line_text="the second role")


@pytest.mark.parametrize("roles", [((2, 40), ((0, 1), 232)), ((0, 24), ((1, 2), 240))])
def test_cutlass_budgets_trace(roles):
    roles_kernel(*roles).compile(*SPEC)


def test_roles_with_registers_must_cover_every_warpgroup():
    kernel = roles_kernel((0, 40), (2, 232))
    expect(ad.TraceError, kernel, SPEC, {}, "warpgroup(s) (1,) have none", line_text="the second role")


@pytest.mark.parametrize(("registers", "fragment"),
                         [(236, "multiple of 8"), (16, "[24, 256]"), (264, "[24, 256]")])
def test_register_counts_setmaxnreg_cannot_take(registers, fragment):
    kernel = roles_kernel((0, registers), ((1, 2), None))
    expect(ad.TraceError, kernel, SPEC, {}, f"registers={registers}", fragment, line_text="the first role")


def test_warpgroup_outside_the_block():
    kernel = roles_kernel((0, None), (2, None), block=256)
    expect(ad.TraceError, kernel, SPEC, {}, "warpgroup 2 is not in the block", line_text="the second role")


def test_roles_are_disjoint():
    kernel = roles_kernel(((0, 1), None), ((1, 2), None))
    expect(ad.TraceError, kernel, SPEC, {}, "warpgroup 1 already has a role", line_text="the second role")


def test_roles_do_not_nest():
    @ad.kernel(block=384)
    def kernel(x):
        with ad.warpgroup_role((0, 1)):  # noqa: SIM117 - the nesting is the point
            with ad.warpgroup_role(1):  # the inner role
                ad.warpgroup_barrier()

    expect(ad.TraceError, kernel, SPEC, {}, "roles may not nest", line_text="the inner role")


def test_roles_sit_at_the_top_level():
    @ad.kernel(block=256)
    def kernel(x):
        for _ in ad.range(2):
            with ad.warpgroup_role(1):  # the role in a loop
                ad.warpgroup_barrier()

    expect(ad.TraceError, kernel, SPEC, {}, "top level", line_text="the role in a loop")


def test_warpgroups_must_be_python_ints():
    @ad.kernel(block=256)
    def kernel(x):
        with ad.warpgroup_role(ad.warpgroup_idx()):  # the role
            pass

    expect(ad.TraceError, kernel, SPEC, {}, "a warpgroup index or a tuple of them", line_text="the role")


def test_allocations_inside_a_role_are_allowed():
    # A role's body runs once per warpgroup, like the kernel's: buffers and barriers made there
    # are allocated once for the kernel.
    @ad.kernel(block=256)
    def kernel(x):
        with ad.warpgroup_role(1):
            buf = ad.smem((64, 64), x.dtype)
            bar = ad.barrier()
            ad.async_copy(x.at[ad.ds(0, 64), :], buf, barrier=bar)
            bar.wait()

    kernel.compile(*SPEC)


def arrive_kernel(cluster, collective):
    @ad.kernel(grid=cluster[0], cluster=cluster)
    def kernel(x):
        bar = ad.barrier(arrival_count=2)
        bar.arrive(collective=collective)  # the arrive

    return kernel


@pytest.mark.parametrize(("cluster", "collective", "dim"),
                         [((1, 1, 1), "x", "x"), ((2, 1, 1), ("x", "y"), "y")])
def test_collective_arrive_needs_the_dims_in_the_cluster(cluster, collective, dim):
    kernel = arrive_kernel(cluster, collective)
    expect(ad.TraceError, kernel, SPEC, {}, f"has one CTA along {dim}", line_text="the arrive")


def test_collective_arrive_names_cluster_dims():
    expect(ad.TraceError, arrive_kernel((2, 1, 1), "w"), SPEC, {}, "cluster dims among",
           line_text="the arrive")
    expect(ad.TraceError, arrive_kernel((2, 1, 1), 3), SPEC, {}, "collective must name cluster dims",
           line_text="the arrive")
