"""Every `ASYNCDSL_*` environment knob, typed and documented, read in one place.

    from asyncdsl.config import knobs
    if knobs.interpret: ...

Knobs are read from the environment on every access, so tests and tools can change them while a
process runs; nothing else in asyncdsl reads `os.environ`.  Every kernel call reads two of them
(`interpret`, `debug`), so on/off flags are read straight from the mapping `os.environ` keeps
its entries in: `os.environ.get` of an unset name costs more than the rest of a warm call.  `KNOBS`
lists them for the README and
`asyncdsl info`.  A value the knob cannot take is an `ArgumentError` naming the variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from asyncdsl.errors import ArgumentError

_FALSE = ("", "0", "false", "no", "off")
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Knob:
    """One environment variable: its name, what values it takes and what it does."""

    variable: str
    values: str
    default: str
    effect: str


INTERPRET = Knob(
    "ASYNCDSL_INTERPRET", "0/1", "0",
    "run ordinary kernel calls in the CPU interpreter (torch, CuPy and asyncdsl arrays are copied "
    "there and back)",
)
DUMP_IR = Knob("ASYNCDSL_DUMP_IR", "0/1", "0",
               "print the IR after every pass and the PTX to stderr as kernels compile")
DEBUG = Knob(
    "ASYNCDSL_DEBUG", "0/1", "0",
    "compile kernels that check at run time what the compiler took on trust (alignment hints, traced "
    "starts) and raise an error naming the user's line after the launch",
)
CACHE_DIR = Knob("ASYNCDSL_CACHE_DIR", "a directory", "~/.cache/asyncdsl",
                 "where compiled cubins and kernels are kept")
KERNEL_CACHE = Knob(
    "ASYNCDSL_KERNEL_CACHE", "0/1", "1",
    "take kernels an earlier process compiled from the same code and argument layout from the disk "
    "without tracing them, and autotuning choices an earlier process timed (0: trace and tune in every "
    "process, for kernels whose trace reads more than code)",
)
PTX_COMPILER = Knob(
    "ASYNCDSL_PTX_COMPILER", "auto/nvjitlink/driver", "auto",
    "which in-process compiler turns PTX into machine code (auto and driver: the driver's JIT, a "
    "whole-program compile; nvjitlink: a relocatable compile, which drops setmaxnreg and takes more "
    "registers where ptxas calls a subroutine)",
)
PRINT_AUTOTUNING = Knob(
    "ASYNCDSL_PRINT_AUTOTUNING", "0/1", "0",
    "print to stderr what each `asyncdsl.autotune` call measured for a new argument layout, and its choice",
)
PTXAS = Knob("ASYNCDSL_PTXAS", "a path", "found on the system",
             "the ptxas binary the tests and `asyncdsl dump` use")

KNOBS: tuple[Knob, ...] = (INTERPRET, DUMP_IR, DEBUG, CACHE_DIR, KERNEL_CACHE, PTX_COMPILER,
                           PRINT_AUTOTUNING, PTXAS)
PTX_COMPILERS = ("auto", "nvjitlink", "driver")


# CPython's os.environ stores its entries in `_data`, keyed by `encodekey(name)`; a plain dict
# lookup there skips the encoding and the KeyError that `os.environ.get` pays for an unset name.
_ENTRIES: dict | None = getattr(os.environ, "_data", None)
_ENCODED = {knob.variable: os.environ.encodekey(knob.variable) for knob in (INTERPRET, DUMP_IR, DEBUG)} if (
    _ENTRIES is not None and hasattr(os.environ, "encodekey")) else {}


def _flag(knob: Knob, default: str = "0") -> bool:
    encoded = _ENCODED.get(knob.variable)
    if encoded is None or _ENTRIES is None:
        return _truth(knob, os.environ.get(knob.variable, default))
    raw = _ENTRIES.get(encoded)
    return default == "1" if raw is None else _truth(knob, os.environ.decodevalue(raw))


def _truth(knob: Knob, value: str) -> bool:
    """An on/off knob's value; one that is neither (`maybe`, a typo) is refused rather than read
    as on."""
    value = value.strip().lower()
    if value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise ArgumentError(f"{knob.variable}={value!r}: expected 1 or 0 (also true/false, yes/no, on/off)")


class Knobs:
    """The current value of every knob (read on each access)."""

    @property
    def interpret(self) -> bool:
        return _flag(INTERPRET)

    @property
    def dump_ir(self) -> bool:
        return _flag(DUMP_IR)

    @property
    def debug(self) -> bool:
        return _flag(DEBUG)

    @property
    def print_autotuning(self) -> bool:
        return _flag(PRINT_AUTOTUNING)

    @property
    def kernel_cache(self) -> bool:
        return _flag(KERNEL_CACHE, "1")

    @property
    def cache_dir(self) -> Path:
        configured = os.environ.get(CACHE_DIR.variable)
        return Path(configured).expanduser() if configured else Path.home() / ".cache" / "asyncdsl"

    @property
    def ptx_compiler(self) -> str:
        choice = os.environ.get(PTX_COMPILER.variable, "auto").strip().lower() or "auto"
        if choice not in PTX_COMPILERS:
            raise ArgumentError(
                f"{PTX_COMPILER.variable}={choice!r}: expected 'auto', 'nvjitlink' or 'driver'")
        return choice

    @property
    def ptxas(self) -> str | None:
        return os.environ.get(PTXAS.variable) or None

    @property
    def library_paths(self) -> tuple[str, ...]:
        """The folders `LD_LIBRARY_PATH` names (where the loader also finds CUDA libraries)."""
        return tuple(path for path in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if path)

    @property
    def cuda_homes(self) -> tuple[str, ...]:
        """CUDA toolkit roots to look for ptxas in (`CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`)."""
        found = (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")
        return tuple(home for home in found if home)


knobs = Knobs()
