"""ptxas, imported in this one place (its module is about to move)."""

from __future__ import annotations

from asyncdsl.runtime.ptxas import assemble, find_ptxas


def have_ptxas() -> bool:
    return find_ptxas() is not None


def assemble_ptx(ptx: str, arch: str) -> None:
    """Raise (an AsyncDSLError naming ptxas' log) unless ptxas accepts `ptx` for `arch`."""
    assemble(ptx, arch)
