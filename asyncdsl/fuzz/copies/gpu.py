"""Fuzz cases on a Hopper GPU: the bytes the GPU leaves must be the interpreter's.

Each case runs through the interpreter first (against the model, as on the CPU); a case the
interpreter ran, that must not fail and that would not fault a GPU (no store at a negative
coordinate) is then launched on the GPU with the same inputs.  Contested output elements (two
CTAs storing different bytes there, in an order the GPU does not fix) are not compared.
Workers are spawned for it: `pool.run_cases(..., run_on_gpu, on_gpu=True)`.
"""

from __future__ import annotations

import numpy as np

from .generate import case_for
from .model import element_bytes
from .oracle import Expectation
from .run import HINTS, Result, run_case


def run_on_gpu(seed: int, index: int, directory: str, budget: float) -> Result:
    case = case_for(seed, index, HINTS)
    if case.compile_only or case.arch != "sm_90a":
        return Result(case.name, "skipped", "compile-only case", "", case.scenario, "", cpu_outcome="ok")
    return run_case(case, directory, budget, (seed, index), on_device=_launch_and_compare)


def _launch_and_compare(module, expectation: Expectation, interpreted: list[np.ndarray]) -> Result:
    from asyncdsl.runtime import to_device, to_host

    arrays = [to_device(array) for array in expectation.arrays]
    module.launch_case(*arrays)
    on_gpu = to_host(arrays[expectation.output])
    want = interpreted[expectation.output]
    got_bytes, want_bytes = element_bytes(on_gpu), element_bytes(want)
    differ = (got_bytes != want_bytes).any(axis=1)
    assert expectation.outcome is not None, "only cases the model answers run on the GPU"
    if expectation.outcome.dont_care is not None:
        differ &= ~expectation.outcome.dont_care.reshape(-1)
    if not differ.any():
        return Result("", "ok", "", "", "", "device")
    wrong = np.flatnonzero(differ)
    shown = ", ".join(
        f"{np.unravel_index(i, want.shape)}: gpu {got_bytes[i].tobytes().hex()} "
        f"interpreter {want_bytes[i].tobytes().hex()}"
        for i in wrong[:6]
    )
    detail = f"{wrong.size} of {want.size} output elements differ between GPU and interpreter ({shown})"
    return Result("", "mismatch", detail, "", "", "device")
