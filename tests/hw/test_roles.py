"""Register budgets of warpgroup roles: the cap ptxas gives each thread, setmaxnreg's rules, and
the per-CTA sum the roles must keep to."""

from __future__ import annotations

import pytest

from asyncdsl.errors import TraceError
from asyncdsl.hw.roles import (
    Role,
    check_budget,
    check_disjoint,
    check_registers,
    check_warpgroups,
    register_cap,
    setmaxnreg_direction,
)


@pytest.mark.parametrize(("threads", "cap"), [(128, 255), (256, 255), (384, 168), (512, 128)])
def test_register_cap_is_what_ptxas_gives_each_thread(threads, cap):
    # 65536 / threads, down to a multiple of 8, at most 255 (ptxas -v reports 168 at 384).
    assert register_cap(threads) == cap


def test_direction_follows_the_cap():
    assert setmaxnreg_direction(40, 384) == "dec"
    assert setmaxnreg_direction(232, 384) == "inc"
    assert setmaxnreg_direction(168, 384) is None
    assert setmaxnreg_direction(232, 256) == "dec"  # below 255


@pytest.mark.parametrize("registers", [24, 40, 232, 240, 256])
def test_setmaxnreg_takes_multiples_of_8_from_24_to_256(registers):
    check_registers(registers)


@pytest.mark.parametrize("registers", [16, 236, 264, 0, True, 40.0])
def test_other_register_counts_are_refused(registers):
    with pytest.raises(TraceError, match="registers"):
        check_registers(registers)


@pytest.mark.parametrize(
    "roles",
    [[Role((2,), 40), Role((0, 1), 232)], [Role((0,), 24), Role((1, 2), 240)], [Role((0, 1, 2), 168)]]
)
def test_cutlass_budgets_fit_384_threads(roles):
    check_budget(roles, 3)


def test_over_budget_shows_the_sum():
    with pytest.raises(TraceError) as caught:
        check_budget([Role((0,), 40), Role((1, 2), 240)], 3)
    assert "40*1 + 240*2 = 520 > 168*3 = 504" in caught.value.message


def test_a_role_without_registers_counts_at_the_cap():
    with pytest.raises(TraceError, match=r"168\*1 \+ 240\*2 = 648 > 168\*3 = 504"):
        check_budget([Role((0,)), Role((1, 2), 240)], 3)
    check_budget([Role((0,)), Role((1, 2), 40)], 3)


def test_roles_setting_registers_must_cover_every_warpgroup():
    with pytest.raises(TraceError, match=r"warpgroup\(s\) \(1,\) have none"):
        check_budget([Role((0,), 40), Role((2,), 232)], 3)
    check_budget([Role((0,)), Role((2,))], 3)  # no registers: roles need not cover


def test_warpgroups_in_range_distinct_and_disjoint():
    with pytest.raises(TraceError,
                       match="warpgroup 3 is not in the block: its 384 threads form warpgroups 0 .. 2"):
        check_warpgroups((3,), 3)
    with pytest.raises(TraceError, match="twice"):
        check_warpgroups((1, 1), 3)
    with pytest.raises(TraceError, match="warpgroup 1 already has a role"):
        check_disjoint(Role((1, 2)), [Role((0, 1))])
