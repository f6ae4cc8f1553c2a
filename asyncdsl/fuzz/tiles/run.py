"""Running one program and naming its outcome.

The program's module is written to a file and imported; the kernel is interpreted on the
model's inputs, its outputs compared with the model's, then compiled and its PTX assembled by
ptxas.  Outcomes:

- `ok`: the outputs the model allows, and PTX that ptxas accepts;
- `refused`: an `AsyncDSLError` naming a line of the program (its kernel or a call);
- `internal`: any other exception, an AsyncDSLError without such a line, or PTX ptxas rejects;
- `hang`: past the per-program budget (SIGALRM; the pool kills what ignores it);
- `mismatch`: an output the model does not allow.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass

import numpy as np

import asyncdsl as ad
from asyncdsl.fuzz.copies.run import load_module
from asyncdsl.fuzz.copies.toolchain import assemble_ptx

from .generate import program_for
from .program import Program
from .render import Source, render

OUTCOMES = ("ok", "refused", "internal", "hang", "mismatch")
FAILURES = ("internal", "hang", "mismatch")


class ProgramTimeout(BaseException):
    """Past the budget (a BaseException, so no `except Exception` swallows it)."""


@dataclass
class Result:
    name: str
    outcome: str
    detail: str
    source: str
    steps: tuple[str, ...] = ()
    stage: str = ""  # import, interpret, compare, compile, ptxas, device
    fatal: bool = False  # the device may be unusable now: the worker must not run another
    seconds: float = 0.0

    @classmethod
    def lost(cls, name: str, outcome: str, detail: str) -> Result:
        """A program that ended without a result of its own (`pool`): no source or steps known."""
        return cls(name, outcome, detail, "")


def _on_alarm(signum, frame):
    raise ProgramTimeout()


def is_clean(error: BaseException, path: str, source: Source) -> bool:
    if not isinstance(error, ad.AsyncDSLError) or error.location is None:
        return False
    if os.path.abspath(error.location.file) != os.path.abspath(path):
        return False
    return source.names_user_line(error.location.line)


def compare(program: Program, arrays: list[np.ndarray]) -> str:
    """Empty if every output is one the model allows, else what differs."""
    outputs = arrays[len(program.inputs) :]
    problems = []
    for output, got in zip(program.outputs, outputs):
        wrong = output.differences(got)
        if wrong.any():
            where = np.argwhere(wrong)[:4]
            shown = ", ".join(
                f"{tuple(int(i) for i in w)}: got {got[tuple(w)]!r} want {output.expected[tuple(w)]!r}"
                for w in where
            )
            problems.append(
                f"{output.name} ({output.what}): {int(wrong.sum())} of {wrong.size} differ ({shown})"
            )
    return "; ".join(problems)


def run_program(
    program: Program, directory: str, budget: float, ptxas: bool = True, on_device=None
) -> Result:
    """Run `program` and name its outcome.  With `on_device(module, program, interpreted)` a
    program the interpreter ran is launched too, and that call's Result is returned."""
    source = render(program)
    stem = f"tile_program_{program.name.replace(':', '_').replace('-', 'm')}"
    path = os.path.join(directory, f"{stem}.py")
    with open(path, "w") as file:
        file.write(source.text)
    steps = tuple(program.steps)

    def result(outcome: str, detail: str, stage: str, fatal: bool = False) -> Result:
        return Result(program.name, outcome, detail, source.text, steps, stage, fatal)

    stage = "import"
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        module = load_module(path, stem)
        arrays = program.arrays()
        stage = "interpret"
        module.interpret_program(*arrays)
        stage = "compare"
        difference = compare(program, arrays)
        if difference:
            return result("mismatch", difference, stage)
        if ptxas:
            stage = "compile"
            compiled = module.compile_program(*program.arrays())
            stage = "ptxas"
            assemble_ptx(compiled.ptx, "sm_90a")
        if on_device is not None:
            stage = "device"
            return on_device(module, program, arrays, result)
        return result("ok", "", stage)
    except ProgramTimeout:
        return result("hang", f"ran past {budget} s while in {stage}", stage, fatal=stage == "device")
    except Exception as error:  # noqa: BLE001 - every exception is classified
        signal.setitimer(signal.ITIMER_REAL, 0)
        detail = f"{type(error).__name__}: {error}"
        if stage == "device":
            return result("internal", f"the GPU run failed: {detail}", stage, fatal=True)
        if stage == "ptxas" or not is_clean(error, path, source):
            trace = "".join(traceback.format_exception(error)[-6:])
            return result("internal", f"{detail}\n{trace}", stage)
        return result("refused", detail, stage)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.modules.pop(stem, None)


def run_indexed(
    seed: int,
    index: int,
    directory: str,
    budget: float,
    ptxas: bool = True,
    draw=program_for,
) -> Result:
    """Program `index` of `seed`, drawn by `draw(seed, index, exact_only)`, and its outcome."""
    started = time.monotonic()
    result = run_program(draw(seed, index, False), directory, budget, ptxas)
    result.seconds = time.monotonic() - started
    return result
