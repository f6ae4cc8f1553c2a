"""What a kernel's trace depends on besides its arguments, the code, as one digest: part of the
key under which compiled kernels are kept on disk (`runtime/binary_cache.py`), so that a process
skips tracing only when the code is what it was when the kernel was compiled.

Tracing runs the kernel function's Python, which may call helpers anywhere in the user's code and
read its globals, through asyncdsl's frontend and passes.  The digest covers every source file of
asyncdsl (loaded or not), every loaded module outside the standard library, the site-packages
directories and packages pip installed elsewhere (`_installed_package`): the user's code, whatever
imported it; and the kernel's own file: each file's path, size and modification time, taken
when this process first looks at it (a module's code was loaded from the file then, not from a
later edit); the Python version; and which installation of xDSL,
numpy and ml_dtypes the process finds.
Other third-party packages are taken not to change traces.  A kernel defined where there is no
file (an interactive session) has no digest and is traced in every process.

Values the kernel's code names are part of the key too (`bound_values`): its closure's cells (a
kernel made by a factory, `make(chunk)`, is the same code for every chunk), its default arguments
and the module globals it reads, which the file holds only as the code that computed them at
import, and the same of the user's functions it names, and the attributes of the user's modules
and classes it reads (`config.BLOCK`, `Tiles.ROWS`, one level deep; a function among them is
followed).  Arrays go by their bytes, not their repr, which elides the middle of a long one, and
dataclasses field by field; an array whose bytes the host cannot read (a GPU tensor) leaves the
kernel without a key, so it is traced in every process.  What a trace reads in other ways
(environment variables, files, random numbers, an attribute of an attribute) is not seen: for
such kernels set ASYNCDSL_KERNEL_CACHE=0.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import importlib.util
import os
import struct
import sys
import sysconfig
from types import CodeType, FunctionType, ModuleType

import numpy as np

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
    if (not isinstance(path, str) or name == "asyncdsl" or name.startswith("asyncdsl.")
            or path.startswith(_THIRD_PARTY) or _installed_package(module, path)):
        return None  # asyncdsl's own files are all counted (`_asyncdsl_files`), loaded or not
    return file_identity(path)


def _installed_package(module: ModuleType, path: str) -> bool:
    """Whether `module` (loaded from `path`) belongs to a package installed outside site-packages
    (`pip install --target DIR` on PYTHONPATH): third-party code like site-packages'.  Counting
    its modules would make the digest depend on which of them happen to be loaded when a key is
    taken (xDSL loads its parts lazily), and a second process would miss kernels the first one
    filed.  Such a module's file is one a `*.dist-info` record in the folder it was imported
    from lists; the user's code beside them (dependencies installed into a project's own folder)
    is listed by none and counts: a module wrongly taken for the user's costs a compile, one
    wrongly taken for a package's a stale kernel."""
    spec = getattr(module, "__spec__", None)
    name = getattr(spec, "name", None) or module.__name__  # __main__ run with -m: its own name
    folder = path = os.path.abspath(path)
    for _ in range(name.count(".") + 1 + (os.path.basename(path) == "__init__.py")):
        folder = os.path.dirname(folder)
    return os.path.relpath(path, folder).replace(os.sep, "/") in _recorded_files(folder)


@functools.cache
def _recorded_files(folder: str) -> frozenset[str]:
    """The files the `*.dist-info` records in `folder` list as installed there (their RECORD's
    paths): none in a project's own source folder, whose editable install records itself in
    site-packages."""
    try:
        records = [os.path.join(folder, entry, "RECORD") for entry in os.listdir(folder)
                   if entry.endswith(".dist-info")]
    except OSError:
        return frozenset()
    files: set[str] = set()
    for record in records:
        try:
            with open(record, newline="", encoding="utf-8") as lines:
                files |= {row[0] for row in csv.reader(lines) if row}
        except (OSError, UnicodeDecodeError, csv.Error):
            continue  # no record, or one not written whole: it lists nothing
    return frozenset(files)


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
    # Copies, taken by dict.copy (one C call: list(d.items()) allocates a tuple an item, and a
    # collection it triggers may run finalizers that let another thread import a module or add
    # to `_seen` half way through).
    for name, module in sys.modules.copy().items():
        if name not in _seen and module is not None:
            _seen[name] = _identity(name, module)
    files = sorted({identity for identity in _seen.copy().values() if identity is not None} | {own}
                   | set(_asyncdsl_files()))
    digest = hashlib.sha256()
    for part in (sys.version, _installed("xdsl"), _installed("numpy"), _installed("ml_dtypes")):
        digest.update(part.encode() + b"\0")
    for path, size, mtime in files:
        digest.update(f"{path}\0{size}\0{mtime}\0".encode())
    return digest.hexdigest()


def bound_values(fn: FunctionType) -> str | None:
    """The values `fn`'s code names besides its arguments, as text for a key: each closure cell,
    default argument and module global its code (nested functions' too) reads, by name, type and
    text (`value_text`), and the attributes it reads of the user's modules and classes.  A function
    of the user's among them is followed (its name and its own bound values), a `functools.partial`
    goes by the arguments it binds; modules, classes and other callables are code, which the
    digest covers by file.  None when the text is not `keyable` (a repr names an object's address,
    or an array's bytes cannot be read on the host)."""
    parts = _bound(fn, set())
    return parts if keyable(parts) else None


def keyable(text: str) -> bool:
    """Whether values written as `text` (by `value_text`) are the same in every process that
    writes the same text: not where a repr names an object's address or an array was unreadable."""
    return " at 0x" not in text and _UNREADABLE not in text


def _bound(fn: FunctionType, seen: set[int]) -> str:
    seen.add(id(fn))
    values = []
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            values.append((name, cell.cell_contents))
        except ValueError:  # a cell not yet filled
            values.append((name, None))
    scope = fn.__globals__
    names = _global_names(fn.__code__)  # attribute names too: `config.BLOCK` reads "config", "BLOCK"
    values += [(name, scope[name]) for name in sorted(names) if name in scope]
    # Defaults are values the function was made with, as its file does not say (`n=n` in a factory).
    given = fn.__defaults__ or ()
    positional = fn.__code__.co_varnames[: fn.__code__.co_argcount]
    defaults = {**dict(zip(positional[len(positional) - len(given) :], given)), **(fn.__kwdefaults__ or {})}
    values += [(f"{name} default", value) for name, value in sorted(defaults.items())]
    parts = [part for name, value in values if (part := _value(name, value, seen))]
    parts += [_attribute_values(name, value, names, seen)
              for name, value in values if _users_namespace(value)]
    return "; ".join(part for part in parts if part)


def _users_namespace(value) -> bool:
    """Whether `value` is a module or a class of the user's code (not asyncdsl's, the standard
    library's or a package's)."""
    if isinstance(value, type):
        value = sys.modules.get(value.__module__)
    return isinstance(value, ModuleType) and _identity(value.__name__, value) is not None


def _attribute_values(name: str, holder: ModuleType | type, names: set[str], seen: set[int]) -> str:
    """The values a user's module or class holds under the names the code reads (`config.BLOCK`,
    `Tiles.ROWS`): its file holds only the code that computed them, and a process may set them
    before it traces.  Every attribute whose name the code uses anywhere is taken, as names alone
    do not say which object an attribute is read from; a function among them is followed as one
    the code names (`helpers.rows()` reads the globals of `rows`).  A class's attributes are its
    own and those of the user's classes it derives from; its other descriptors (properties) are
    code."""
    if isinstance(holder, ModuleType):
        found = vars(holder)
    else:
        found = {}
        for base in reversed(holder.__mro__):
            if base is holder or _users_namespace(base):
                found.update(vars(base))
    parts = []
    for attribute in sorted(names & found.keys()):
        value = found[attribute]
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        elif not isinstance(value, FunctionType) and hasattr(type(value), "__get__"):
            continue
        parts.append(_value(f"{name}.{attribute}", value, seen))
    return "; ".join(part for part in parts if part)


def _value(name: str, value, seen: set[int]) -> str:
    """One bound value as text (`name=...`, or the bare text for no name), or "" for code the
    digest covers by file."""
    label = f"{name}=" if name else ""
    if isinstance(value, functools.partial):  # the arguments it binds are values, its function code
        bound = ", ".join(
            filter(None, [_value("", value.func, seen), value_text(value.args), value_text(value.keywords)]))
        return f"{label}partial({bound})"
    if isinstance(value, FunctionType) and _users(value) and id(value) not in seen:
        return f"{label}{value.__module__}.{value.__qualname__}({_bound(value, seen)})"
    if isinstance(value, ModuleType) or callable(value):
        return ""
    return f"{label}{type(value).__qualname__}:{value_text(value)}"


# What an array whose bytes the host cannot read is written as (`keyable` refuses it).
_UNREADABLE = "<array the host cannot read>"
_DEPTH = 4


def value_text(value, depth: int = 0) -> str:
    """`value` as text that differs when it does: an array's repr elides all but its ends (numpy
    and torch print ...), so arrays (numpy's, and whatever numpy can view: a torch CPU tensor)
    go by dtype, shape and a hash of their bytes; one numpy cannot read (on a GPU, or of a type
    numpy lacks) is `_UNREADABLE`.  Tuples, lists, dicts and dataclasses (every field, those its
    repr leaves out too) are written element by element, so an array inside one is too (a few
    levels deep; deeper is `_UNREADABLE`)."""
    if isinstance(value, (tuple, list, dict)):
        if depth == _DEPTH:
            return _UNREADABLE
        items = value.items() if isinstance(value, dict) else enumerate(value)
        inner = ", ".join(f"{value_text(key, depth + 1)}: {value_text(item, depth + 1)}"
                          for key, item in items)
        return f"{type(value).__qualname__}({inner})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Field by field: its repr leaves out fields with repr=False and elides arrays.
        if depth == _DEPTH:
            return _UNREADABLE
        inner = ", ".join(f"{field.name}={value_text(getattr(value, field.name), depth + 1)}"
                          for field in dataclasses.fields(value))
        return f"{type(value).__qualname__}({inner})"
    if not isinstance(value, np.ndarray) and any(
        hasattr(value, protocol)
        for protocol in ("__array__", "__array_interface__", "__cuda_array_interface__", "__dlpack__")
    ):
        try:
            value = np.asarray(value)
        except Exception:  # a GPU tensor, a dtype numpy has no type for: whatever the library raises
            return _UNREADABLE
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return _UNREADABLE  # its bytes are addresses
        return (f"{value.dtype}{value.shape}:"
                f"{hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}")
    if type(value) is float and value != value:  # NaNs of other bits trace other constants
        return f"nan({struct.pack('<d', value).hex()})"
    return repr(value)


def _users(fn: FunctionType) -> bool:
    """Whether `fn` is the user's code (not asyncdsl's, the standard library's or a package's)."""
    module = fn.__module__ or ""
    return not (module == "asyncdsl" or module.startswith("asyncdsl.")
                or fn.__code__.co_filename.startswith(_THIRD_PARTY))


def _global_names(code: CodeType) -> set[str]:
    """The names `code` and the functions defined in it look up outside their own scope."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= _global_names(constant)
    return names
