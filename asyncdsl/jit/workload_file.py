"""A workload's kernels in a file: what one run of a program compiled, warmed up by the next.

    step(model, batch)                                  # a run that calls every kernel once
    asyncdsl.save_workload("llama.workload")            # every specialisation it compiled or loaded
    ...
    asyncdsl.warmup(asyncdsl.load_workload("llama.workload"))   # at the next start: compile them all

A serving engine or a training job knows its kernels only by running: the host functions pick
kernels and constexprs from the shapes (`asyncdsl.kernels.gemm`'s plan, the attention's blocks).
`seen_specializations` lists every specialisation the process's kernels hold for the GPU, and
`save_workload` writes them as JSON: each kernel by its module and the name it is bound to
there, the argument specs (shapes, dtypes, scalar kinds) and the constexprs (ints, floats,
bools, strings, None, asyncdsl dtypes and tuples of these; a NaN keeps its bits).
`load_workload` imports the modules and gives `Specialization`s back, which `asyncdsl.warmup`
compiles side by side into the disk cache.  A kernel that is no importable module's global
(made inside a function, or in the script run as `__main__`, which another process cannot
import) or a constexpr of another type (a numpy scalar: its type is part of the kernel's key)
cannot be named in a file: a list given to `save_workload` holding one is refused with its
name; by default such specialisations are left out with a warning naming them.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import struct
import sys
import threading
import warnings
from collections.abc import Iterable
from typing import Any

from asyncdsl import dtypes
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.jit.kernel import Kernel
from asyncdsl.jit.specs import ArraySpec, ScalarSpec
from asyncdsl.jit.warmup import Specialization
from asyncdsl.kernel_binary import constexpr_value

FORMAT = "asyncdsl workload 1"


def seen_specializations() -> list[Specialization]:
    """Every specialisation this process compiled (for the GPU or the interpreter) or read from
    the disk cache, not those compiled only for profiling or for several devices, kernel by
    kernel in the order the kernels were defined, each kernel's in the order first used."""
    seen = []
    for kernel in Kernel.defined():
        held = kernel.specializations
        keys = dict.fromkeys([*held.binaries, *held.compiled])
        for specs, constexprs, _debug, profile, devices in keys:
            if not profile and devices == 1:
                specialization = Specialization(kernel, specs, {name: constexpr_value(key)
                                                                for name, key in constexprs})
                if specialization not in seen:  # the same kernel in and out of debug mode
                    seen.append(specialization)
    return seen


def save_workload(path: str | os.PathLike,
                  specializations: Iterable[Specialization] | None = None) -> list[Specialization]:
    """Write `specializations` to the file `path` (one a file cannot name is an `ArgumentError`);
    by default `seen_specializations()`, leaving out those a file cannot name with a warning
    that names them.  Returns what it wrote."""
    written, entries, left_out = [], [], []
    for specialization in seen_specializations() if specializations is None else specializations:
        try:
            entries.append(_entry(specialization))
        except ArgumentError as refusal:
            if specializations is not None:
                raise
            left_out.append(refusal.message)
            continue
        written.append(specialization)
    # Written beside and moved into place: ranks of one job saving to one path, or a reader at
    # the next start, never see half a file.
    partial = f"{os.fspath(path)}.{os.getpid()}.{threading.get_ident()}.partial"
    with open(partial, "w") as file:
        json.dump({"format": FORMAT, "kernels": entries}, file, indent=1)
    os.replace(partial, path)
    if left_out:
        warnings.warn(f"asyncdsl.save_workload left out {len(left_out)} specialisation(s): "
                      + "; ".join(dict.fromkeys(left_out)), stacklevel=2)
    return written


def load_workload(path: str | os.PathLike) -> list[Specialization]:
    """The specialisations `save_workload` wrote to `path`, their kernels imported."""
    with open(path) as file:
        try:
            saved = json.load(file)
        except json.JSONDecodeError as error:
            raise ArgumentError(f"{os.fspath(path)} is no workload file: {error}", user_location()) from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise ArgumentError(f"{os.fspath(path)} is no workload file of this version ({FORMAT!r})",
                            user_location())
    entries = saved.get("kernels")
    if not isinstance(entries, list):
        raise ArgumentError(f"{os.fspath(path)} is a workload file without its list of kernels",
                            user_location())
    return [_specialization(entry, os.fspath(path), number) for number, entry in enumerate(entries)]


def _entry(specialization: Specialization) -> dict:
    kernel = specialization.kernel
    module = kernel.fn.__module__
    # None for code run by exec; the script run as __main__ is another process's own script.
    loaded = sys.modules.get(module) if module and module != "__main__" else None
    name = next((global_name for global_name, value in vars(loaded).items() if value is kernel),
                None) if loaded is not None else None
    if name is None:
        raise ArgumentError(f"kernel {kernel.__name__} (defined at {kernel.definition}) is no global of "
                            "an importable module, so a workload file cannot name it: define it at the top "
                            "level of a module the program imports (not the script it runs)", user_location())
    specs = [{"shape": list(spec.shape), "dtype": spec.dtype.name} if isinstance(spec, ArraySpec)
             else {"scalar": spec.kind, "divisor": spec.divisor} for spec in specialization.specs]
    constexprs = {key: _value(value, f"{kernel.__name__}'s constexpr {key}")
                  for key, value in specialization.constexprs.items()}
    return {"module": module, "kernel": name, "specs": specs, "constexprs": constexprs}


def _value(value: Any, what: str) -> Any:
    """A constexpr as JSON: plain values as they are, tuples, dtypes and non-finite floats tagged
    (a NaN by its bits, which JSON's NaN drops; standard JSON has neither NaN nor infinity)."""
    if type(value) is float and not math.isfinite(value):
        return {"float": struct.pack("<d", value).hex()}
    if value is None or type(value) in (bool, int, float, str):  # a subclass keys another kernel
        return value
    if type(value) is tuple:
        return {"tuple": [_value(item, what) for item in value]}
    if type(value) is dtypes.DType:
        return {"dtype": value.name}
    raise ArgumentError(f"{what} is {value!r}, a {type(value).__name__}: a workload file keeps ints, "
                        "floats, bools, strings, None, asyncdsl dtypes and tuples of them", user_location())


def _constexpr(value: Any) -> Any:
    if isinstance(value, dict):
        if "tuple" in value:
            return tuple(_constexpr(item) for item in value["tuple"])
        if "float" in value:
            return struct.unpack("<d", bytes.fromhex(value["float"]))[0]
        name = value["dtype"]
        return dtypes.BOOL if name == dtypes.BOOL.name else dtypes.as_dtype(name)
    return value


def _specialization(entry: Any, path: str, number: int) -> Specialization:
    try:
        module, name = entry["module"], entry["kernel"]
        specs = tuple(ArraySpec(tuple(spec["shape"]), spec["dtype"]) if "shape" in spec
                      else ScalarSpec(spec["scalar"], spec["divisor"]) for spec in entry["specs"])
        constexprs = {key: _constexpr(value) for key, value in entry["constexprs"].items()}
    except (KeyError, TypeError, ValueError, AttributeError, ArgumentError) as error:
        detail = error.message if isinstance(error, ArgumentError) else f"{type(error).__name__}: {error}"
        raise ArgumentError(f"{path}: kernel entry {number} is not one save_workload writes ({detail})",
                            user_location()) from None
    try:
        kernel = getattr(importlib.import_module(module), name, None)
    except ImportError as error:
        raise ArgumentError(f"{path} names kernel {module}.{name}, whose module does not import here: "
                            f"{error}", user_location()) from None
    if not isinstance(kernel, Kernel):
        raise ArgumentError(f"{path} names kernel {module}.{name}, which that module no longer defines",
                            user_location())
    return Specialization(kernel, specs, constexprs)
