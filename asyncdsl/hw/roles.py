"""Warpgroup roles and their register budgets (`setmaxnreg`).

A CTA of several warpgroups can give each role (a set of warpgroups, e.g. one producer and two
consumers) its own per-thread register count: the role's code starts with
`setmaxnreg.dec/inc.sync.aligned.u32 n`.  The rules (docs/hardware.md §14.5):

- `n` is a multiple of 8 in [24, 256] (PTX ISA, setmaxnreg).
- Every thread starts with the cap: 65536 / threads, rounded down to a multiple of 8, at most
  255 (168 at 384 threads, which `ptxas -v` reports); a kernel built to hold `ctas_per_sm` CTAs a
  multiprocessor at once shares the 65536 among all their threads.  A kernel whose roles set
  registers states it as `.maxnreg` beside its `.reqntid`, without which ptxas ignores
  `setmaxnreg` (C7508).
  A role below the cap releases registers (`dec`), one above takes them (`inc`); `inc` blocks
  until the CTA's pool has them, so roles that take more than the others release hang forever.  Hence the
  budget: Σ (n × warpgroups of the role) ≤ cap ×
  warpgroups of the CTA, with every warpgroup in exactly one role (a role without `registers`
  keeps the cap).  CUTLASS's 40/232/232 and 24/240/240 at 384 threads both spend exactly 504.

The checks raise `TraceError` without a location; the frontend attaches the user's line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from asyncdsl.errors import TraceError, is_int
from asyncdsl.hw.limits import (
    MAX_REGISTERS_PER_THREAD,
    REGISTER_ALLOCATION_UNIT,
    REGISTERS_PER_CTA,
    SETMAXNREG_RANGE,
    WARPGROUP_THREADS,
)


def register_cap(threads: int, ctas_per_sm: int = 1) -> int:
    """The per-thread register count ptxas gives a kernel with `.reqntid threads` (`.maxnreg`
    of that, where `ctas_per_sm` CTAs share a multiprocessor's registers)."""
    per_thread = REGISTERS_PER_CTA // (threads * ctas_per_sm)
    return min(MAX_REGISTERS_PER_THREAD, per_thread - per_thread % REGISTER_ALLOCATION_UNIT)


def check_registers(registers: int) -> None:
    low, high = SETMAXNREG_RANGE
    if not is_int(registers):
        raise TraceError(f"registers must be a Python int, got {registers!r}")
    if not low <= registers <= high or registers % REGISTER_ALLOCATION_UNIT:
        raise TraceError(
            f"registers={registers}: setmaxnreg takes a multiple of {REGISTER_ALLOCATION_UNIT} in "
            f"[{low}, {high}]"
        )


def setmaxnreg_direction(registers: int, threads: int, ctas_per_sm: int = 1) -> str | None:
    """"dec" or "inc" for a role of `registers` in a CTA of `threads`; None when it keeps the cap."""
    cap = register_cap(threads, ctas_per_sm)
    if registers == cap:
        return None
    return "dec" if registers < cap else "inc"


@dataclass(frozen=True)
class Role:
    """One `warpgroup_role`: its warpgroups and register count (None: it keeps the cap)."""

    warpgroups: tuple[int, ...]
    registers: int | None = None


def check_warpgroups(warpgroups: Sequence[int], num_warpgroups: int) -> None:
    if not warpgroups:
        raise TraceError("a role needs at least one warpgroup")
    for index in warpgroups:
        if not 0 <= index < num_warpgroups:
            raise TraceError(
                f"warpgroup {index} is not in the block: its {num_warpgroups * WARPGROUP_THREADS} "
                f"threads form warpgroups 0 .. {num_warpgroups - 1}"
            )
    if len(set(warpgroups)) != len(warpgroups):
        raise TraceError(f"warpgroups {tuple(warpgroups)} names a warpgroup twice")


def check_disjoint(role: Role, earlier: Sequence[Role]) -> None:
    for other in earlier:
        shared = sorted(set(role.warpgroups) & set(other.warpgroups))
        if shared:
            raise TraceError(
                f"warpgroup {shared[0]} already has a role (warpgroups {other.warpgroups}): roles "
                "must be disjoint, each warpgroup runs one"
            )


def check_budget(roles: Sequence[Role], num_warpgroups: int, ctas_per_sm: int = 1) -> None:
    """When any role sets registers: the roles cover every warpgroup and spend at most the CTA's
    registers (the message shows the sum)."""
    if not any(role.registers is not None for role in roles):
        return
    cap = register_cap(num_warpgroups * WARPGROUP_THREADS, ctas_per_sm)
    covered = {index for role in roles for index in role.warpgroups}
    missing = sorted(set(range(num_warpgroups)) - covered)
    if missing:
        raise TraceError(
            f"roles set registers, so every warpgroup needs a role (setmaxnreg budgets are per "
            f"CTA); warpgroup(s) {tuple(missing)} have none"
        )
    terms = [(role.registers if role.registers is not None else cap, len(role.warpgroups)) for role in roles]
    spent = sum(n * count for n, count in terms)
    budget = cap * num_warpgroups
    if spent > budget:
        sum_text = " + ".join(f"{n}*{count}" for n, count in terms)
        raise TraceError(
            f"the roles take more registers than the CTA has: {sum_text} = {spent} > "
            f"{cap}*{num_warpgroups} = {budget} ({cap} per thread is what ptxas gives each of "
            f"{num_warpgroups * WARPGROUP_THREADS} threads{sharing(ctas_per_sm)}); setmaxnreg.inc would "
            "wait forever"
        )


def sharing(ctas_per_sm: int) -> str:
    """", n CTAs sharing a multiprocessor" for messages about a kernel of `ctas_per_sm` n > 1."""
    return f", {ctas_per_sm} CTAs sharing a multiprocessor" if ctas_per_sm > 1 else ""
