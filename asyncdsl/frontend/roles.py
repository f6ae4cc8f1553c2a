"""Warpgroup roles in kernel code: `with asyncdsl.warpgroup_role(2, registers=40):`.

The body runs only in the named warpgroups of each CTA; with `registers`, those warpgroups first
set their per-thread register count (`setmaxnreg`): a producer that only issues copies gives
registers back so that the consumers can hold larger accumulators.  Code outside roles runs in
every warpgroup, as everywhere else.  `asyncdsl.hw.roles` holds the rules; they are checked here,
as each role is traced (its own numbers, disjointness with the roles before it) and when the
kernel's trace ends (every warpgroup has a role once any role sets registers, and the register
budget holds).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from xdsl.ir import Block

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.launch_shape import LaunchShape
from asyncdsl.hw.limits import WARPGROUP_THREADS
from asyncdsl.hw.roles import (
    Role,
    check_budget,
    check_disjoint,
    check_registers,
    check_warpgroups,
    register_cap,
    sharing,
)
from asyncdsl.ir_locations import from_ir_location


@contextmanager
def warpgroup_role(warpgroups: int | tuple[int, ...], registers: int | None = None) -> Iterator[None]:
    """Run the block only in warpgroup(s) `warpgroups` (an int or a tuple of ints) of each CTA;
    with `registers` (a multiple of 8 in [24, 256]), those warpgroups first set their per-thread
    register count to it.  Roles are disjoint, do not nest, and sit at the kernel's top level.
    Once any role sets registers, every warpgroup needs a role (one without `registers` keeps
    what ptxas gives each thread: 65536 / threads rounded down to a multiple of 8, at most 255;
    65536 / (threads × ctas_per_sm) for a kernel of `ctas_per_sm`) and the roles together may
    use at most that many per thread on average.

    The interpreter runs the body in the named warpgroups and ignores `registers`.
    """
    what = "asyncdsl.warpgroup_role"
    tracer = tracing.current(what)
    location = user_location()
    indices = _indices(warpgroups)
    role = Role(indices, registers)
    enclosing = enclosing_role(tracer.block)
    if enclosing is not None:
        raise TraceError(
            f"roles may not nest: this role (warpgroups {indices}) is inside the role of warpgroups "
            f"{enclosing.warpgroup_indices}",
            location,
        )
    if not tracer.at_top_level:
        raise TraceError(
            f"{what} must be at the kernel's top level (each warpgroup enters its role once), not "
            "inside asyncdsl.range or asyncdsl.when",
            location,
        )
    try:
        if registers is not None:
            check_registers(registers)
        check_warpgroups(indices, tracer.launch.num_warpgroups)
        check_disjoint(role, [_role(op) for op in _roles(tracer.kernel_body)])
    except TraceError as error:
        raise error.at(location) from None
    op = tracer.emit(ir.WarpgroupRoleOp(indices, registers), location)
    with tracer.inside(op.body.block, runs_once=True):
        yield


def check_roles(body: Block, launch: LaunchShape) -> None:
    """The rules that involve every role of a traced kernel body, reported at its last role."""
    ops = _roles(body)
    try:
        check_budget([_role(op) for op in ops], launch.num_warpgroups, launch.ctas_per_sm)
    except TraceError as error:
        raise error.at(from_ir_location(ops[-1])) from None


def _indices(warpgroups) -> tuple[int, ...]:
    indices = (warpgroups,) if isinstance(warpgroups, int) else warpgroups
    if (
        not isinstance(indices, tuple)
        or not indices
        or any(not is_int(i) for i in indices)
    ):
        raise TraceError(
            f"warpgroup_role takes a warpgroup index or a tuple of them (Python ints), got {warpgroups!r}",
            user_location(),
        )
    return indices


def _roles(body: Block) -> list[ir.WarpgroupRoleOp]:
    return [op for op in body.ops if isinstance(op, ir.WarpgroupRoleOp)]


def _role(op: ir.WarpgroupRoleOp) -> Role:
    return Role(op.warpgroup_indices, op.register_count)


def register_budget(tracer: tracing.Tracer) -> tuple[int, str]:
    """The per-thread registers of the code being traced, and whose they are: its role's
    `registers`, else what ptxas gives every thread of the CTA."""
    role = enclosing_role(tracer.block)
    if role is not None and role.register_count is not None:
        return role.register_count, f"the role of warpgroups {role.warpgroup_indices}"
    threads, ctas = tracer.launch.num_warpgroups * WARPGROUP_THREADS, tracer.launch.ctas_per_sm
    return register_cap(threads, ctas), f"this {threads}-thread CTA{sharing(ctas)}"


def enclosing_role(block: Block) -> ir.WarpgroupRoleOp | None:
    parent = block.parent_op()
    while parent is not None and not isinstance(parent, ir.WarpgroupRoleOp):
        parent = parent.parent_op()
    return parent
