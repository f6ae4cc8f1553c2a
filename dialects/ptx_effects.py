"""What a PTX instruction does beyond its registers, declared as traits of its op class.

A pass that reorders, merges or drops instructions asks these, never the instruction's text.
Each names the state it acts on as the PTX ISA does (its *Memory Consistency Model* and
*Parallel Synchronization and Communication Instructions* chapters): a memory access goes
through the generic or the async proxy, a barrier synchronises the threads of a scope, an
mbarrier or a commit group is the state an arrival or a wait is on.

`ptx.instr` declares none of these because nobody declared its effects: a pass must assume it
may touch any memory and synchronise with anything (as it must at a branch or a label, where
paths split and join).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xdsl.traits import NoMemoryEffect, OpTrait

Proxy = Literal["generic", "async"]
# What an arrival, a commit or a wait is on: an mbarrier's phase, the commit groups of one
# asynchronous engine (`cp.async`, the bulk copies, the tensor cores).
AsyncState = Literal["mbarrier", "cp.async group", "bulk group", "wgmma group"]


class RegistersOnly(NoMemoryEffect):
    """Reads and writes registers only (and the kernel's parameters, which nothing writes):
    no barrier or fence has anything of it to order."""


@dataclass(frozen=True)
class AccessesMemory(OpTrait):
    """Reads or writes memory through `proxy`: generic-proxy accesses are ordered by barriers
    and ordinary fences, async-proxy ones (TMA, bulk copies, wgmma operands) only after a
    `fence.proxy.async`."""

    proxy: Proxy


@dataclass(frozen=True)
class Synchronizes(OpTrait):
    """Threads of `scope` wait here for each other (or arrive for others to wait): a barrier,
    which also orders the memory accesses of the threads it synchronises."""

    scope: Literal["cta", "cluster"]


@dataclass(frozen=True)
class Fences(OpTrait):
    """A fence: orders this thread's earlier accesses before its later ones, across the generic
    and the async proxy where `proxy` is "async"."""

    proxy: Proxy


@dataclass(frozen=True)
class ActsOn(OpTrait):
    """What the instruction does to `state`: "arrive" (an arrival, or expected or completed
    transaction bytes, releasing what the thread did before), "start" (work that completes later
    on it, not when the instruction retires), "close" (ends the thread's open commit group:
    what it started since the last one) or "wait" (until it completes: an mbarrier phase, all
    but some commit groups)."""

    action: Literal["arrive", "start", "close", "wait"]
    state: AsyncState
