"""What a case must do: its input arrays, and either the outputs a run may leave or the reason
it must fail.  This is the one entry point of the reference model (`model.py`, `rules.py`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import expr
from .cases import Case
from .layout import byte_size
from .model import Outcome, Unmodelled, load_outcome, make_inputs, predicate_holds, store_outcome
from .rules import certainly_valid, check, check_compile_only, engine
from .window import Dim, UserError, resolve_key


@dataclass
class Expectation:
    arrays: list[np.ndarray]  # the kernel's arguments; the runner runs on copies
    output: int  # which argument the kernel writes
    outcome: Outcome | None  # None: no run may succeed (must_fail), or the model has no answer
    must_fail: UserError | None
    must_pass: str | None  # why a clean error is wrong too (None: an error is acceptable)
    announce: int  # bytes a load with arrive=False announces on its barrier
    gpu_safe: bool  # nothing in the case would fault on a GPU (checked before running there)
    engine: str | None


def _negative_coordinates(case: Case, dims: tuple[Dim, ...]) -> bool:
    """Whether a CTA that runs the copy (its predicate holds) has a negative coordinate."""
    return any(
        expr.evaluate(dim.start, cta) < 0
        for cta in expr.ctas(case.grid, case.cluster)
        if predicate_holds(case, cta)
        for dim in dims
    )


def expect(case: Case, rng: np.random.Generator) -> Expectation:
    arrays = make_inputs(case, rng)
    output = 1
    announce = byte_size(case.smem_shape, case.element)
    if case.misuse:
        misuse = UserError(f"the API is misused: {case.misuse[1]}")
        return Expectation(arrays, output, None, misuse, None, announce, False, None)
    try:
        dims = resolve_key(case)
        chosen = engine(case, dims)
        cut = check(case, dims, chosen)
        build = load_outcome if case.direction == "load" else store_outcome
        outcome = build(case, dims, chosen, arrays, cut)
    except UserError as error:
        return Expectation(arrays, output, None, error, None, announce, False, None)
    except Unmodelled:
        return Expectation(arrays, output, None, None, None, announce, False, chosen)
    # A store at a negative coordinate faults on the H200; the GPU test leaves those out.
    gpu_safe = not (case.direction == "store" and chosen != "bulk" and _negative_coordinates(case, dims))
    must_pass = certainly_valid(case, dims, chosen)
    return Expectation(arrays, output, outcome, None, must_pass, announce, gpu_safe, chosen)


def expect_compile_only(case: Case) -> Expectation:
    """For arrays too large to run: only whether the case must be refused."""
    try:
        dims = resolve_key(case)
        if case.implementation == "tma" and case.oob == "zeros":
            check_compile_only(case, dims)
    except UserError as error:
        return Expectation([], 1, None, error, None, 0, False, None)
    return Expectation([], 1, None, None, None, 0, False, None)
