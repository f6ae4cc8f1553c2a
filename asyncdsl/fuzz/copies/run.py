"""Running one case and naming its outcome.

A case's kernel is written to a file and imported, then compiled, assembled by ptxas and
interpreted on the model's inputs.  Outcomes:

- `ok`: PTX that ptxas accepts and an interpreter result the model accepts (compile-only
  cases: PTX that ptxas accepts);
- `clean_error`: an `AsyncDSLError` located in the case's file, in the kernel or at the call;
- `internal`: any other exception, or an AsyncDSLError without such a location;
- `hang`: past the per-case budget (SIGALRM here; the pool kills what ignores it);
- `mismatch`: a result the model does not accept, a run of a case that must fail, or a clean
  error on a case the documented rules say must succeed;
- `ptxas_reject`: ptxas refused the PTX asyncdsl printed.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import asyncdsl as ad

from .cases import Case
from .generate import case_for
from .model import Outcome, element_bytes
from .oracle import Expectation, expect, expect_compile_only
from .render import Source, render
from .toolchain import assemble_ptx

OUTCOMES = ("ok", "clean_error", "internal", "hang", "mismatch", "ptxas_reject")
GPU_OUTCOMES = ("ok", "internal", "hang", "mismatch", "skipped")  # with --gpu: GPU against interpreter
FAILURES = ("internal", "hang", "mismatch", "ptxas_reject")
HINTS = hasattr(ad, "multiple_of")


class CaseTimeout(BaseException):
    """The case ran past its budget (a BaseException, so no `except Exception` swallows it)."""


@dataclass
class Result:
    name: str
    outcome: str
    detail: str  # the error, or why the outcome is a failure
    source: str
    scenario: str
    stage: str = ""  # where it ended: import, compile, ptxas, interpret, compare, device
    cpu_outcome: str = ""  # on the GPU: the outcome of the interpreter's run against the model
    fatal: bool = False  # the device may be unusable now: the worker must not run another case
    seconds: float = 0.0

    @classmethod
    def lost(cls, name: str, outcome: str, detail: str) -> Result:
        """A case that ended without a result of its own (`pool`): no source or scenario known."""
        return cls(name, outcome, detail, "", "")


def _on_alarm(signum, frame):
    raise CaseTimeout()


def load_module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def is_clean(error: BaseException, path: str, source: Source) -> bool:
    """An AsyncDSLError that names a line of the user's code: the kernel or the call."""
    if not isinstance(error, ad.AsyncDSLError) or error.location is None:
        return False
    if os.path.abspath(error.location.file) != os.path.abspath(path):
        return False
    return source.names_user_line(error.location.line)


def arguments(case: Case, expectation: Expectation) -> list:
    """The kernel's arguments: fresh copies of the model's arrays, or specs for compile-only
    cases (whose arrays would not fit in memory)."""
    if case.compile_only:
        from .render import array_names

        dtype = getattr(ad, case.dtype)
        slab = (case.num_ctas, *case.buffer_shape)
        gmem = case.gmem_shape
        shapes = {"x": gmem, "y": gmem, "dump": slab, "src": slab, "fill": case.buffer_shape}
        return [ad.ArraySpec(shapes[name], dtype) for name in array_names(case)]
    return [a.copy() for a in expectation.arrays]


def run_case(
    case: Case, directory: str, budget: float, seed_values: tuple[int, ...], on_device: Callable | None = None
) -> Result:
    """Run `case` and name its outcome.  With `on_device(module, expectation, interpreted)`,
    a case the interpreter ran (and that is safe on a GPU) is also run there: `on_device`
    returns the Result of comparing the GPU's bytes with the interpreter's."""
    if case.compile_only:
        expectation = expect_compile_only(case)
    else:
        expectation = expect(case, np.random.default_rng(seed_values))
    source = render(case, expectation.announce)
    path = os.path.join(directory, f"case_{case.name.replace(':', '_')}.py")
    with open(path, "w") as file:
        file.write(source.text)
    module_name = f"fuzz_case_{case.name.replace(':', '_').replace('-', 'm')}"
    stage = "import"
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        module = load_module(path, module_name)
        args = arguments(case, expectation)
        stage = "compile"
        compiled = module.compile_case(*args)
        stage = "ptxas"
        assemble_ptx(compiled.ptx, case.arch)
        if case.compile_only:
            if expectation.must_fail is not None:
                detail = f"compiled, though it must be refused: {expectation.must_fail.reason}"
                return Result(case.name, "mismatch", detail, source.text, case.scenario, stage)
            return Result(case.name, "ok", "compiled and assembled", source.text, case.scenario, stage)
        stage = "interpret"
        module.interpret_case(*args)
        signal.setitimer(signal.ITIMER_REAL, 0)
        stage = "compare"
        result = _judge_run(case, expectation, args, source)
        if on_device is None:
            return result
        ran = result.outcome in ("ok", "mismatch") and expectation.outcome is not None
        if not ran or not expectation.gpu_safe:
            return _skipped(result, "not run on the GPU")
        stage = "device"
        signal.setitimer(signal.ITIMER_REAL, budget)
        device = on_device(module, expectation, args)
        device.name, device.source, device.scenario = case.name, source.text, case.scenario
        device.cpu_outcome = result.outcome
        if result.outcome != "ok":
            device.detail += f"\n(the interpreter differs from the model: {result.detail})"
            if device.outcome == "mismatch" and case.direction == "store" and case.num_ctas > 1:
                # The model's map of which CTAs store where is wrong for this kernel, so stores
                # that race on the GPU are not masked: the difference says nothing new.
                device.outcome = "skipped"
        return device
    except CaseTimeout:
        detail = f"ran past {budget} s while in {stage}"
        result = Result(case.name, "hang", detail, source.text, case.scenario, stage)
        if on_device is None or stage == "device":
            result.fatal = on_device is not None
            return result
        return _skipped(result, "not run on the GPU")
    except Exception as error:  # noqa: BLE001 - every exception is classified
        signal.setitimer(signal.ITIMER_REAL, 0)
        if stage == "device":
            detail = f"the GPU run failed: {type(error).__name__}: {error}"
            return Result(case.name, "internal", detail, source.text, case.scenario, stage, fatal=True)
        result = _judge_error(case, expectation, error, stage, path, source)
        return result if on_device is None else _skipped(result, "not run on the GPU")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.modules.pop(module_name, None)


def _skipped(result: Result, why: str) -> Result:
    result.cpu_outcome, result.outcome = result.outcome, "skipped"
    result.detail = f"{why}: {result.cpu_outcome}: {result.detail}"
    return result


def _judge_error(case, expectation, error, stage, path, source) -> Result:
    detail = f"{type(error).__name__}: {error}"
    scenario = case.scenario
    if stage == "ptxas" and isinstance(error, ad.AsyncDSLError):
        return Result(case.name, "ptxas_reject", detail, source.text, scenario, stage)
    if not is_clean(error, path, source):
        trace = "".join(traceback.format_exception(error)[-6:])
        return Result(case.name, "internal", f"{detail}\n{trace}", source.text, scenario, stage)
    if expectation.must_pass:
        detail = f"refused {expectation.must_pass}: {detail}"
        return Result(case.name, "mismatch", detail, source.text, scenario, stage)
    must_fail = expectation.must_fail
    if must_fail is not None and must_fail.compile_time and stage == "interpret":
        why = f"compiled, though it must be refused while compiling ({must_fail.reason}); then {detail}"
        return Result(case.name, "mismatch", why, source.text, scenario, stage)
    return Result(case.name, "clean_error", detail, source.text, scenario, stage)


def _judge_run(case, expectation: Expectation, args, source) -> Result:
    scenario = case.scenario
    if expectation.must_fail is not None:
        detail = f"ran, though it must fail: {expectation.must_fail.reason}"
        return Result(case.name, "mismatch", detail, source.text, scenario, "compare")
    output = args[expectation.output]
    if expectation.outcome is None:
        return Result(case.name, "ok", "not modelled", source.text, scenario, "compare")
    if expectation.outcome.accepts(output):
        return Result(case.name, "ok", "", source.text, scenario, "compare")
    detail = describe_difference(expectation.outcome, output)
    return Result(case.name, "mismatch", detail, source.text, scenario, "compare")


def describe_difference(outcome: Outcome, output: np.ndarray) -> str:
    expected = outcome.alternatives[0]
    got, want = element_bytes(output), element_bytes(expected)
    wrong = np.flatnonzero((got != want).any(axis=1))
    if outcome.dont_care is not None:
        wrong = wrong[~outcome.dont_care.reshape(-1)[wrong]]
    shown = ", ".join(
        f"{np.unravel_index(i, output.shape)}: got {got[i].tobytes().hex()} want {want[i].tobytes().hex()}"
        for i in wrong[:6]
    )
    return f"{wrong.size} of {output.size} output elements differ from the model ({shown})"


def run_indexed(seed: int, index: int, directory: str, budget: float) -> Result:
    started = time.monotonic()
    case = case_for(seed, index, HINTS)
    result = run_case(case, directory, budget, (seed, index))
    result.seconds = time.monotonic() - started
    return result
