"""The on-disk cache of compiled kernels by specialisation: a process that calls a kernel whose
code and argument layout an earlier process compiled gets its `KernelBinary` from disk, with no
tracing, no passes and no PTX printing (the cubin then comes from the cubin cache).

The host side computes the key (what the trace depends on: `jit/code_digest.py`, the argument
specs, the constexprs, the kernel's options); this module only files binaries under keys, in
`$ASYNCDSL_CACHE_DIR/binary` (or `~/.cache/asyncdsl/binary`), with the cubin cache's atomic
writes, checked reads and per-key locks (`file_lock.py`).  A binary is pickled; reading one
back builds nothing but the plain records of `asyncdsl.kernel_binary`, the `Arch` they name and
Python's own containers and numbers, so a file that is not what it claims fails as a miss
instead of running anything.
"""

from __future__ import annotations

import contextlib
import io
import pickle
from pathlib import Path

from asyncdsl import kernel_binary
from asyncdsl.config import knobs
from asyncdsl.hw import options
from asyncdsl.kernel_binary import KernelBinary
from asyncdsl.runtime.module_cache import ChecksummedFiles

BINARY_FORMAT = "asyncdsl-binary-2"  # part of every key: bump when KernelBinary's fields change
_RECORDS = frozenset(name for name, value in vars(kernel_binary).items() if isinstance(value, type)
                     and value.__module__ == kernel_binary.__name__)
_BUILTINS = frozenset({"tuple", "list", "dict", "frozenset", "set", "int", "float", "str", "bytes", "bool"})


def binary_directory() -> Path:
    return knobs.cache_dir / "binary"


class _RecordsOnly(pickle.Unpickler):
    """Unpickles `asyncdsl.kernel_binary` records and builtin values, nothing else."""

    def find_class(self, module: str, name: str):
        if module == kernel_binary.__name__ and name in _RECORDS:
            return getattr(kernel_binary, name)
        if module == options.__name__ and name == "Arch":  # the target a binary was compiled for
            return options.Arch
        if module == "builtins" and name in _BUILTINS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a kernel binary")


class BinaryCache:
    """Kernel binaries on disk, one file per specialisation key."""

    def __init__(self, directory: Path | None = None):
        self._files = ChecksummedFiles(directory or binary_directory(), ".kernel", b"asyncdsl-binary1",
                                       "a compiled kernel")

    def load(self, key: str) -> KernelBinary | None:
        data = self._files.load(key)
        if data is None:
            return None
        try:
            binary = _RecordsOnly(io.BytesIO(data)).load()
        except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError):
            return None
        return binary if isinstance(binary, KernelBinary) else None

    def locked(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """The lock of `key` across processes, held while its kernel is compiled (`file_lock.py`)."""
        return self._files.locked(key)

    def store(self, key: str, binary: KernelBinary) -> None:
        self._files.store(key, pickle.dumps(binary, protocol=pickle.HIGHEST_PROTOCOL))
