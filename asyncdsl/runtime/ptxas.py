"""Assembling PTX with NVIDIA's `ptxas`, without a GPU.

`ptxas` comes from the `nvidia-cuda-nvcc` wheel (the `test` extra), a CUDA toolkit
(`$CUDA_HOME/bin`), `PATH`, or `$ASYNCDSL_PTXAS`. The tests assemble every kernel the project
builds; the runtime does not need it (the driver compiles PTX itself).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from asyncdsl.config import PTXAS, knobs
from asyncdsl.errors import PtxAssemblyError


@functools.cache
def find_ptxas() -> str | None:
    """The path of a `ptxas` binary, or None."""
    candidates = [knobs.ptxas]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += [os.path.join(root, "cu13", "bin", "ptxas"),
                       os.path.join(root, "cuda_nvcc", "bin", "ptxas")]
    candidates += [os.path.join(home, "bin", "ptxas") for home in knobs.cuda_homes]
    candidates.append(shutil.which("ptxas"))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def assemble(ptx: str, arch: str = "sm_90a", *, verbose: bool = False) -> tuple[bytes, str]:
    """Assemble `ptx` for `arch`; returns (cubin bytes, ptxas log). Raises PtxAssemblyError."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise PtxAssemblyError(
            "ptxas not found: install the test extra (pip install 'asyncdsl[test]', which brings "
            f"nvidia-cuda-nvcc), a CUDA toolkit, or set {PTXAS.variable}"
        )
    with tempfile.TemporaryDirectory(prefix="asyncdsl-ptxas-") as tmp:
        source, cubin = Path(tmp, "kernel.ptx"), Path(tmp, "kernel.cubin")
        source.write_text(ptx)
        command = [ptxas, f"-arch={arch}", str(source), "-o", str(cubin)]
        if verbose:
            command.insert(1, "-v")
        done = subprocess.run(command, capture_output=True, text=True)
        log = done.stdout + done.stderr
        if done.returncode != 0:
            numbered = "\n".join(f"{n:4d}  {line}" for n, line in enumerate(ptx.splitlines(), 1))
            raise PtxAssemblyError(f"ptxas -arch={arch} rejected the PTX:\n{log}\n{numbered}")
        return cubin.read_bytes(), log
