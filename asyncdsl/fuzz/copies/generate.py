"""Drawing cases: one generator, fed by a seeded `random.Random` (the CLI) or by hypothesis.

Every random decision goes through a `Chooser`, so `python -m asyncdsl.fuzz.copies --seed S` draws the
same cases on every machine (case i of seed S comes from `random.Random(f"{S}:{i}")`) and the
pytest strategy (`cases()`) lets hypothesis draw and shrink the very same decisions.

The mix aims at both kinds of outcome: most cases follow the documented rules (so they must
compile, assemble and match the model), and a steady fraction breaks one rule on purpose (a
box over 256, a misaligned start, a wrong buffer shape, a bad swizzle, a reduction the table
refuses, ...) and must end in a clean error.  Shapes stay small so that interpreting is fast.
"""

from __future__ import annotations

import random
from dataclasses import replace

from .cases import REDUCTIONS, Case
from .draw import Chooser, Draw, HypothesisChooser, RandomChooser, weighted
from .scenarios import bulk_case, collective_case, cp_async_case, huge_case, misuse_case, tma_case

SCENARIOS = (
    ("load", 38), ("store", 18), ("reduce", 9), ("bulk", 11), ("cp_async", 8), ("collective", 11),
    ("huge", 2), ("partition", 3), ("misuse", 4),
)


def draw_case(c: Chooser, name: str, hints: bool) -> Case:
    """One case; `hints`: whether `ad.multiple_of` exists (only then are starts hinted)."""
    d = Draw(c, hints)
    scenario = weighted(c, SCENARIOS)
    if scenario in ("load", "store"):
        case = tma_case(d, name, scenario)
    elif scenario == "reduce":
        case = tma_case(d, name, "store", c.choice(REDUCTIONS))
    elif scenario == "bulk":
        case = bulk_case(d, name)
    elif scenario == "cp_async":
        case = cp_async_case(d, name)
    elif scenario == "collective":
        case = collective_case(d, name)
    elif scenario == "misuse":
        case = misuse_case(d, name)
    elif scenario == "partition":
        case = collective_case(d, name, partition=True)
    else:
        case = huge_case(d, name)
    return replace(case, aims=(scenario,))


def case_for(seed: int, index: int, hints: bool) -> Case:
    """Case `index` of `seed`: independent of how many cases run and in which process."""
    return draw_case(RandomChooser(random.Random(f"{seed}:{index}")), f"{seed}:{index}", hints)


def cases(hints: bool):
    """The hypothesis strategy of cases."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw):
        return draw_case(HypothesisChooser(draw), "hypothesis", hints)

    return strategy()
