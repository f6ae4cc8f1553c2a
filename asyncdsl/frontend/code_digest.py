"""What a kernel's trace depends on besides its arguments, the code, as one digest: part of the
key under which compiled kernels are kept on disk (`runtime/binary_cache.py`), so that a process
skips tracing only when the code is what it was when the kernel was compiled.

Tracing runs the kernel function's Python, which may call helpers anywhere in the user's code and
read its globals, through asyncdsl's frontend and passes.  The digest covers every source file of
asyncdsl (loaded or not), every loaded module outside the standard library and the site-packages
directories (the user's code, whatever imported it) and the kernel's own file: each file's path,
size and modification time, taken when this process first looks at it (a module's code was loaded
from the file then, not from a later edit); the Python version; and which installation of xDSL,
numpy and ml_dtypes the process finds.
Other third-party packages are taken not to change traces.  A kernel defined where there is no
file (an interactive session) has no digest and is traced in every process.  What a trace reads
besides code (environment variables, files, random numbers) is not seen: for such kernels set
ASYNCDSL_KERNEL_CACHE=0.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import sysconfig
from types import ModuleType

from asyncdsl.runtime.module_cache import file_identity

# The standard library and site-packages, as configured and with links resolved: a module's
# __file__ is compared as given (resolving every path would cost ~10 ms a process).
_THIRD_PARTY = tuple({
    form + os.sep
    for path in {sysconfig.get_paths()[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    for form in (os.path.abspath(path), os.path.realpath(path))
})
# Module name -> (path, size, mtime_ns) of its file, or None when it is not the user's or
# asyncdsl's code; filled as modules are first seen.
_seen: dict[str, tuple[str, int, int] | None] = {}


def _identity(name: str, module: ModuleType) -> tuple[str, int, int] | None:
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or name == "asyncdsl" or name.startswith("asyncdsl.") or path.startswith(_THIRD_PARTY):
        return None  # asyncdsl's own files are all counted (`_asyncdsl_files`), loaded or not
    return file_identity(path)


@functools.cache
def _asyncdsl_files() -> tuple[tuple[str, int, int], ...]:
    """Every source file of asyncdsl (with its dialects and passes), loaded or not: which of them
    a process has imported depends on what it traced so far, the trace does not."""
    folders = list(sys.modules["asyncdsl"].__path__)
    for package in ("asyncdsl.dialects", "asyncdsl.passes"):
        spec = importlib.util.find_spec(package)  # finds it without running it
        folders += list(spec.submodule_search_locations or ()) if spec is not None else []
    files = []
    for folder in folders:
        for root, directories, names in os.walk(folder):
            directories[:] = [d for d in directories if d != "__pycache__"]
            files += [file_identity(os.path.join(root, name)) for name in names if name.endswith(".py")]
    return tuple(sorted(identity for identity in files if identity is not None))


@functools.cache
def _installed(name: str) -> str:
    """Which installation of package `name` this process finds, loaded or not: its __init__'s
    path, size and modification time (rewritten by every install; cheaper than xDSL's lazily
    computed __version__)."""
    spec = importlib.util.find_spec(name)
    path = spec.origin if spec is not None else None
    return str(file_identity(path)) if isinstance(path, str) else ""


def code_digest(kernel_file: str) -> str | None:
    """The digest of the code loaded now, with the kernel's own file `kernel_file`; None when that
    file does not exist (no digest can vouch for the kernel's code)."""
    own = file_identity(kernel_file)
    if own is None:
        return None
    for name, module in list(sys.modules.items()):
        if name not in _seen and module is not None:
            _seen[name] = _identity(name, module)
    files = sorted({identity for identity in _seen.values() if identity is not None} | {own} | set(_asyncdsl_files()))
    digest = hashlib.sha256()
    for part in (sys.version, _installed("xdsl"), _installed("numpy"), _installed("ml_dtypes")):
        digest.update(part.encode() + b"\0")
    for path, size, mtime in files:
        digest.update(f"{path}\0{size}\0{mtime}\0".encode())
    return digest.hexdigest()
