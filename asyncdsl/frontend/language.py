"""The kernel language as one namespace for the library's own kernel code (`asyncdsl.blocks`,
`asyncdsl.kernels`), which sits below the top package and so cannot `import asyncdsl as ad`:

    from asyncdsl.frontend import language as ad

    def doubled(tile):
        return ad.fma(tile, 2.0, ad.zeros(tile.shape, ad.float32))

Every name that `import asyncdsl as ad` gives a kernel body is here with the same value: the
element types, the errors, `cdiv`, the layouts and transforms, and what kernel bodies call.  The
kernel decorator and the rest of the host side are not: kernels import those themselves.

What kernel bodies call comes with the compiler (xDSL, the dialects): its modules are imported
on the first use of one of their names, while a kernel is traced, as `import asyncdsl` does.  So
importing the library loads no compiler, and neither does a launch of a kernel whose binary an
earlier process compiled (docs/hardware.md §19: loading it cost such a call half a second).
"""

from __future__ import annotations

import importlib

from asyncdsl import dtypes as _dtypes
from asyncdsl import errors as _errors
from asyncdsl.frontend import cdiv as _cdiv
from asyncdsl.hw import fragments as _fragments
from asyncdsl.hw import transforms as _transforms

# Light modules: what host code (grid functions, host functions) uses too, without the compiler.
_LIGHT = (_dtypes, _errors, _cdiv, _fragments, _transforms)
# The modules of what kernel bodies call, the most used first.
_CALL_MODULES = ("control", "core", "refs", "copy", "sync", "tile_access", "tiles", "tile_functions",
                 "registers", "wgmma", "pipeline", "roles", "turns", "distributed", "im2col", "prefetch",
                 "profile", "row_gather", "assume", "index_loads")


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    for module in _LIGHT:
        if name in vars(module):
            return _found(name, vars(module)[name])
    # The kernel body's calls: imported on first use, while a kernel is traced, one module at a
    # time in this order until one has the name (a kernel loads the modules of what it calls).
    for stem in _CALL_MODULES:
        module = importlib.import_module(f"asyncdsl.frontend.{stem}")
        if name in vars(module):
            return _found(name, vars(module)[name])
    raise AttributeError(f"the kernel language has no {name!r}")


def _found(name: str, value):
    globals()[name] = value  # the next use is a plain lookup
    return value
