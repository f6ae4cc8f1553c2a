"""What ptxas made of each PTX text, kept for one run of the suite.

Many tests assemble the same PTX: a kernel that several tests compile (an example's default
configuration, a library kernel at the shapes its tests share) is assembled by each of them.
ptxas's cubin and log depend only on the PTX, the arch and `-v`, so a run assembles each
distinct (PTX, arch, -v) once: the result goes to a directory of the run, which the pytest-xdist
workers share, and a later assembly of the same text reads it back.  Only PTX that ptxas
accepted is kept: a rejection runs ptxas again, so a test that expects one sees ptxas refuse.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import shutil
import tempfile
from pathlib import Path

from asyncdsl.runtime import ptxas

DIRECTORY = "ASYNCDSL_TEST_ASSEMBLED"  # the run's directory, made by the process that starts the run


def install() -> Path | None:
    """Route `asyncdsl.runtime.ptxas.assemble` through the run's directory (made here unless a
    parent process made it); returns the directory this process made, which it must remove."""
    made = None
    if DIRECTORY not in os.environ:
        made = Path(tempfile.mkdtemp(prefix="asyncdsl-test-ptxas-"))
        os.environ[DIRECTORY] = str(made)  # inherited by the workers pytest-xdist starts later
    directory = Path(os.environ[DIRECTORY])
    assemble = ptxas.assemble

    def assemble_once(ptx: str, arch: str = "sm_90a", *, verbose: bool = False) -> tuple[bytes, str]:
        key = hashlib.sha256(f"{arch}\0{verbose}\0{ptx}".encode()).hexdigest()
        path = directory / key
        with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError):
            return pickle.loads(path.read_bytes())
        result = assemble(ptx, arch, verbose=verbose)
        with contextlib.suppress(OSError):  # written whole, then renamed: readers never see half
            descriptor, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
            with os.fdopen(descriptor, "wb") as file:
                pickle.dump(result, file)
            os.replace(temporary, path)
        return result

    assemble_once.__doc__ = assemble.__doc__
    ptxas.assemble = assemble_once
    return made


def remove(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
