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
other instruction that is not register-only (memory, fences, mbarriers, other barrier forms
such as the 256-thread ones of warpgroups taking turns, labels, branches) ends the run.
"""

from __future__ import annotations

import functools

from xdsl.ir import Block

from asyncdsl.dialects import ptx

CTA_BARRIER = "bar.sync 0;"
WARPGROUP_BARRIER = "bar.sync #{0}, 128;"

# Instructions that read and write registers only (and `ld.param`, the kernel's read-only
# parameters): a barrier may move across them.
_REGISTER_ONLY = frozenset({
    "abs", "add", "and", "bfe", "bfi", "bfind", "brev", "clz", "cnot", "copysign", "cos", "cvt", "cvta",
    "div", "ex2", "fma", "lg2", "mad", "max", "min", "mov", "mul", "neg", "not", "or", "popc", "prmt", "rcp",
    "rem", "rsqrt", "selp", "set", "setp", "shf", "shfl", "shl", "shr", "sin", "sqrt", "sub", "tanh", "testp",
    "xor",
})


def drop_redundant_barriers(block: Block) -> None:
    """Erase from `block` (a `ptx.kernel`'s flat body) the barriers that each run of barriers
    and register instructions does not need."""
    run: list[ptx.InstrOp] = []  # the barriers kept in the current run
    cta_kept = False
    for op in list(block.ops):
        # Read as the printer does, past IRDL's accessors: this looks at every instruction.
        properties = op.properties
        text = properties["text"].data if type(op) is ptx.InstrOp else None
        kind = _kind(text)
        if kind is _REGISTER:
            continue
        if kind is _OTHER or "guard_negated" in properties:
            run, cta_kept = [], False
        elif cta_kept:
            block.erase_op(op)  # the run's CTA barrier synchronises every warpgroup's threads
        elif kind is _CTA:
            for kept in run:
                block.erase_op(kept)
            run, cta_kept = [op], True
        elif any(kept.operands[0] is op.operands[0] for kept in run):
            block.erase_op(op)  # this warpgroup id's barrier is in the run already
        else:
            run.append(op)


_CTA, _WARPGROUP, _REGISTER, _OTHER = "cta", "warpgroup", "register", "other"


@functools.lru_cache(maxsize=4096)
def _kind(text: str | None) -> str:
    """What an instruction of this text is to the merge (None: a label, where paths join)."""
    if text == CTA_BARRIER:
        return _CTA
    if text == WARPGROUP_BARRIER:
        return _WARPGROUP
    if (text is not None
            and (text.split(".", 1)[0].split(" ", 1)[0] in _REGISTER_ONLY or text.startswith("ld.param"))):
        return _REGISTER
    return _OTHER
