"""Merging the barriers of a lowered kernel (`passes/to_ptx/barriers.py`): between two memory
operations, a run of barriers and register instructions keeps one CTA barrier if it has one,
else one barrier per warpgroup id, and nothing else changes. (fixtures/drop_redundant_barriers*.mlir
show the merge on kernel bodies as text.)"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from xdsl.ir import Block

import asyncdsl as ad
from asyncdsl.dialects import ptx
from asyncdsl.passes.to_ptx.barriers import drop_redundant_barriers
from asyncdsl.passes.to_ptx.builder import PtxBuilder

# The instructions a sequence is drawn from; barrier ids are registers a and b (two warpgroup ids).
KINDS = ("cta", "wg a", "wg b", "guarded wg a", "turn", "register", "load", "store", "fence",
         "label", "branch")


def _build(kinds: list[str]) -> tuple[Block, list]:
    """A block of one instruction per kind (after the two id registers); returns it and the ops
    made for `kinds`, in order."""
    block = Block()
    b = PtxBuilder(block)
    ids = {"a": b.mov("b32", 1), "b": b.mov("b32", 2)}
    guard = b.emit("setp.eq.u32 {}, {}, 0;", "pred", ids["a"])
    address = b.mov("b32", 0)
    for kind in kinds:
        if kind == "cta":
            b.bar("sync", 0)
        elif kind.startswith("wg"):
            b.bar("sync", ids[kind[-1]], 128)
        elif kind == "guarded wg a":
            b.bar("sync", ids["a"], 128, guard=guard)
        elif kind == "turn":
            b.bar("sync", ids["a"], 256)
        elif kind == "register":
            b.emit("add.s32 {}, {}, 1;", "b32", address)
        elif kind == "load":
            b.emit("ld.shared.f32 {}, [{}];", "f32", address, instr=ptx.MemoryOp)
        elif kind == "store":
            b.run("st.shared.f32 [{}], 0f00000000;", address, instr=ptx.MemoryOp)
        elif kind == "fence":
            b.append(ptx.ProxyFenceOp("shared::cta"))
        elif kind == "label":
            b.label("L")
        else:
            b.branch("L", guard)
    made = list(block.ops)[4:]
    return block, made


def _barrier(kind: str) -> bool:
    return kind in ("cta", "wg a", "wg b")


def _expected(kinds: list[str]) -> list[str]:
    """The reference: cut the sequence at every instruction that is neither a mergeable barrier
    nor register-only; in each run keep its register instructions in order and, at the place of
    its first CTA barrier, that barrier alone, or else the first barrier of each id."""
    out: list[str] = []
    run: list[str] = []

    def close():
        if any(k == "cta" for k in run):
            first = run.index("cta")
            out.extend(k for i, k in enumerate(run) if not _barrier(k) or i == first)
        else:
            seen = set()
            for k in run:
                if _barrier(k):
                    if k in seen:
                        continue
                    seen.add(k)
                out.append(k)
        run.clear()

    for kind in kinds:
        if _barrier(kind) or kind == "register":
            run.append(kind)
        else:
            close()
            out.append(kind)
    close()
    return out


@given(st.lists(st.sampled_from(KINDS), max_size=30))
def test_runs_of_barriers_keep_what_the_reference_keeps(kinds):
    block, made = _build(kinds)
    drop_redundant_barriers(block)
    kept = [kind for kind, op in zip(kinds, made) if op.parent is block]
    assert kept == _expected(kinds)


def test_memory_labels_and_other_barrier_forms_end_a_run():
    for between in ("load", "store", "fence", "label", "branch", "turn", "guarded wg a"):
        block, made = _build(["wg a", between, "wg a"])
        drop_redundant_barriers(block)
        assert all(op.parent is block for op in made), between


def test_warpgroups_sharing_a_row_keep_one_barrier_per_exchange():
    # softmax_halves: each warpgroup reduces its half (warp partials through scratch), puts the
    # result in shared memory, and the CTA barrier hands it to the other warpgroup.
    from asyncdsl.kernels.softmax import softmax_halves

    spec = ad.ArraySpec((4096, 8192), ad.bfloat16)
    text = softmax_halves.ptx(spec, spec)
    assert text.count("bar.sync 0;") == 3  # after the barriers' init, after each exchange
    # per exchange: the warp partials are written, then read and the scratch is free
    assert len(re.findall(r"bar\.sync %r\d+, 128;", text)) == 4
