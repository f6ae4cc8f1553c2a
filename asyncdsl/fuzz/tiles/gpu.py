"""Programs on a Hopper GPU: every output byte the GPU leaves must be the interpreter's.

A program is drawn with exact steps only (no approximate function, no sum held to an error
bound: every output bit is defined), run in the interpreter and held to the model as on the CPU,
then launched with the same inputs.  With `compile_only` the launch is replaced by compiling and
assembling the kernel, so the GPU batch's kernels can be built on a machine without a GPU.
Workers are spawned for it (CUDA does not survive a fork): `pool.run_cases(..., on_gpu=True)`.
"""

from __future__ import annotations

import time

import numpy as np

from asyncdsl.fuzz.copies.toolchain import assemble_ptx

from .generate import program_for
from .program import Program
from .run import Result, run_program


def run_on_gpu(
    seed: int,
    index: int,
    directory: str,
    budget: float,
    draw=program_for,
    compile_only: bool = False,
) -> Result:
    started = time.monotonic()
    on_device = _compile_and_assemble if compile_only else _launch_and_compare
    result = run_program(draw(seed, index, True), directory, budget, ptxas=False, on_device=on_device)
    result.seconds = time.monotonic() - started
    return result


def _compile_and_assemble(module, program: Program, interpreted: list[np.ndarray], result) -> Result:
    assemble_ptx(module.compile_program(*program.arrays()).ptx, "sm_90a")
    return result("ok", "compiled and assembled (not launched)", "device")


def _launch_and_compare(module, program: Program, interpreted: list[np.ndarray], result) -> Result:
    from asyncdsl.runtime import to_device, to_host

    arrays = [to_device(array) for array in program.arrays()]
    module.launch_program(*arrays)
    first = len(program.inputs)
    problems = []
    for output, on_gpu, want in zip(program.outputs, arrays[first:], interpreted[first:]):
        got = to_host(on_gpu)
        bits = "u1" if want.dtype.itemsize == 1 else f"u{want.dtype.itemsize}"
        differ = got.view(bits) != want.view(bits)
        if differ.any():
            where = [tuple(int(i) for i in w) for w in np.argwhere(differ)[:4]]
            shown = ", ".join(f"{w}: gpu {got[w]!r} interpreter {want[w]!r}" for w in where)
            problems.append(f"{output.name}: {int(differ.sum())} of {differ.size} differ ({shown})")
    if problems:
        return result("mismatch", "GPU against the interpreter: " + "; ".join(problems), "device")
    return result("ok", "", "device")
