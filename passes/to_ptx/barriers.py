"""Barriers that order nothing another barrier next to them does not, left out of a lowered kernel.

Each lowering rule brackets its own shared-memory accesses with the barriers they need, without
looking at its neighbours: a warpgroup's `bar.sync id, 128` before an ordinary store (no thread
still reads the old value) and after it (every thread sees the new one), after a reduction's
reads of its scratch (free for the next use), before a plain mbarrier arrive.  Side by side, a
reduction's trailing barrier meets the next store's leading one, and a store's trailing barrier
the CTA barrier the user asked for next.

Between two memory operations, barriers separated only by register instructions act as one
synchronisation point (a barrier orders memory accesses, and register instructions have none to
order; PTX ISA, *Parallel Synchronization and Communication Instructions: bar, barrier*): that
point needs a CTA barrier if there is one, else one barrier of each warpgroup id.  The rest go.
Only unpredicated `bar.sync id, 128` (a warpgroup) and `bar.sync 0` (the CTA) are merged; any
other instruction whose class does not declare it register-only (memory, fences, mbarriers,
other barrier forms such as the 256-thread ones of warpgroups taking turns, branches, and
instructions with undeclared effects) ends the run, as does a label.
"""

from __future__ import annotations

import functools
from typing import Literal

from xdsl.ir import Block, Operation, SSAValue

from asyncdsl.dialects import ptx
from asyncdsl.dialects.ptx_effects import RegistersOnly
from asyncdsl.hw.limits import WARPGROUP_THREADS

Kind = Literal["cta", "warpgroup", "register", "other"]


def drop_redundant_barriers(block: Block) -> None:
    """Erase from `block` (a `ptx.kernel`'s flat body) the barriers that each run of barriers
    and register instructions does not need."""
    run: list[ptx.BarrierOp] = []  # the barriers kept in the current run
    cta_kept = False
    for op in list(block.ops):
        kind = _kind(op)
        if kind == "register":
            continue
        if kind == "other":
            run, cta_kept = [], False
        elif cta_kept:
            block.erase_op(op)  # the run's CTA barrier synchronises every warpgroup's threads
        else:
            assert isinstance(op, ptx.BarrierOp)
            if kind == "cta":
                for kept in run:
                    block.erase_op(kept)
                run, cta_kept = [op], True
            elif any(kept.barrier_id is op.barrier_id for kept in run):
                block.erase_op(op)  # this warpgroup id's barrier is in the run already
            else:
                run.append(op)


def _kind(op: Operation) -> Kind:
    """What an instruction is to the merge: a mergeable barrier, register-only, or an end of the
    run (a label, where paths join, included)."""
    if type(op) is ptx.BarrierOp:
        if op.guard is not None or op.mode.data != "sync":
            return "other"
        if op.thread_count is None and op.barrier_id == 0:
            return "cta"
        if op.thread_count == WARPGROUP_THREADS and isinstance(op.barrier_id, SSAValue):
            return "warpgroup"
        return "other"
    return "register" if _registers_only(type(op)) else "other"


@functools.cache
def _registers_only(op_class: type[Operation]) -> bool:
    return op_class.has_trait(RegistersOnly)

