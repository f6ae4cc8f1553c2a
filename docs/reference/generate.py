"""Write docs/reference/: every public name of asyncdsl with its signature and docstring.

    python docs/reference/generate.py

One page per area of the API (`PAGES`), one for the element types, one for the error classes, and
one each for the library packages `asyncdsl.kernels` and `asyncdsl.blocks`.  Everything printed
comes from the code: signatures from `inspect`, text from the docstrings, so the way to change a
page is to change the docstring and run this again (tests/test_reference_docs.py fails while the
pages on disk differ from what this writes).  Members of a class are listed when they are public
and have a docstring of their own.  The output depends only on the code: no dates, no addresses.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Area pages: file stem -> (title, what the page is about, names of `asyncdsl`, and the classes of
# objects kernel code is handed rather than names it imports, as dotted paths).
PAGES: dict[str, tuple[str, str, list[str], list[str]]] = {
    "kernels": (
        "Kernels, calls and tuning",
        "The decorator, what a kernel call takes, the tools that choose a kernel's grid and "
        "constexprs, and compiling a workload's kernels ahead of its first call.",
        ["kernel", "constexpr", "Kernel", "ArraySpec", "cdiv", "autotune", "Choice", "Autotuned",
         "persistent_grid", "PersistentGrid", "warmup", "Specialization", "WarmupReport",
         "seen_specializations", "save_workload", "load_workload"],
        [],
    ),
    "grid-and-control": (
        "Where a warpgroup is, and control flow",
        "Indices of the CTA, its cluster and its warpgroup, and indices read from device memory; "
        "loops and branches that run on the GPU.",
        ["program_id", "num_programs", "cluster_id", "cluster_cta_id", "cluster_shape",
         "warpgroup_idx", "load_index", "range", "when", "multiple_of", "check_all"],
        ["asyncdsl.frontend.scalars.Scalar"],
    ),
    "memory-and-copies": (
        "Memory and asynchronous copies",
        "Shared memory, slices of GMEM arrays, the copy engines (TMA, bulk, cp.async, gathers, "
        "im2col, prefetch) and the transforms that lay a GMEM window out in shared memory.",
        ["smem", "ds", "async_copy", "await_async_copy", "await_cp_async_copy", "CopyPartition",
         "async_prefetch", "async_gather", "async_scatter", "async_copy_im2col", "TileTransform",
         "TransposeTransform", "CollapseLeadingIndicesTransform", "DropUnitDimsTransform",
         "MemRefTransform", "Rounding"],
        ["asyncdsl.frontend.refs.GmemRef", "asyncdsl.frontend.refs.SmemRef"],
    ),
    "synchronisation": (
        "Barriers, fences and pipelines",
        "mbarriers and their phases, the barriers of a warpgroup, a CTA and a cluster, the proxy "
        "fence, producer/consumer rings, warpgroups taking turns and warpgroup roles.",
        ["barrier", "warpgroup_barrier", "cta_barrier", "cluster_barrier", "fence_async_smem",
         "Pipeline", "turns", "Turns", "warpgroup_role"],
        ["asyncdsl.frontend.sync.Barrier", "asyncdsl.frontend.sync.Barriers"],
    ),
    "register-tiles": (
        "Register tiles",
        "Values held in the warpgroup's registers: loads and stores, construction, elementwise "
        "math, mutable tiles that cross loops, and register layouts (docs/register-tiles.md says "
        "what each operation computes).",
        ["RegisterTile", "load", "store", "full", "zeros", "iota", "where", "maximum", "minimum",
         "fma", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "registers",
         "RegisterRef", "WGMMA", "WGMMA_ROW", "WGMMA_COL", "WGMMA_TRANSPOSED", "strided"],
        [],
    ),
    "tensor-cores": (
        "Tensor cores",
        "wgmma: matrix products from shared memory (and registers) into a register accumulator.",
        ["wgmma", "wgmma_wait"],
        [],
    ),
    "several-devices": (
        "Several devices",
        "Kernel code that reads, writes and signals other devices' copies of symmetric arrays "
        "(docs/distributed.md).",
        ["device_id", "num_devices", "signal", "wait_signal"],
        [],
    ),
    "profiling": (
        "Profiling",
        "Named regions timed on the device (or on the interpreter's logical clock) and what a "
        "profiled launch returns.",
        ["region", "Profile"],
        [],
    ),
}
LIBRARIES = {"library-kernels": "asyncdsl.kernels", "library-blocks": "asyncdsl.blocks"}
HEADER = ("<!-- Generated from the docstrings by `python docs/reference/generate.py`: edit the code's "
          "docstrings and run it again. -->\n\n")


class _Annotation(str):
    """An annotation kept as text (the code uses `from __future__ import annotations`), printed
    without quotes."""

    def __repr__(self) -> str:
        return str(self)


class _Default:
    """A default value printed as the code would write it; objects without a readable repr (whose
    repr holds an address) by their type."""

    def __init__(self, value):
        text = repr(value)
        self.text = f"<{type(value).__name__}>" if " at 0x" in text else text

    def __repr__(self) -> str:
        return self.text


def signature(obj, name: str, method: bool = False) -> str:
    """`name(parameters) -> result`, or just `name` where Python cannot tell the signature; a
    method's `self` (or `cls`) left out."""
    try:
        found = inspect.signature(obj)
    except (TypeError, ValueError):
        return name
    if method and found.parameters:
        found = found.replace(parameters=list(found.parameters.values())[1:])
    parameters = [
        parameter.replace(
            annotation=(_Annotation(parameter.annotation) if isinstance(parameter.annotation, str)
                        else parameter.annotation),
            default=(parameter.default if parameter.default is inspect.Parameter.empty
                     else _Default(parameter.default)))
        for parameter in found.parameters.values()
    ]
    result = found.return_annotation
    if isinstance(result, str):
        result = _Annotation(result)
    return name + str(found.replace(parameters=parameters, return_annotation=result))


def docstring(obj) -> str:
    text = inspect.getdoc(obj)
    return text.strip() if text else "(no docstring)"


def _own_doc(value) -> str | None:
    """The docstring a class member was written with (None when it only inherits one)."""
    target = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
    doc = getattr(target, "__doc__", None)
    return inspect.cleandoc(doc) if doc else None


def members(cls) -> list[str]:
    """The public methods and properties `cls` itself defines with a docstring, in source order
    (`__call__` counts as public: calling the object is how it is used)."""
    lines = []
    for name, value in vars(cls).items():
        member = callable(value) or isinstance(value, (property, classmethod, staticmethod))
        if not member or (name.startswith("_") and name != "__call__"):
            continue
        doc = _own_doc(value)
        if doc is None:
            continue
        if isinstance(value, property):
            lines += [f"#### `{cls.__name__}.{name}` (property)", "", doc, ""]
        else:
            function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            lines += [f"#### `{cls.__name__}.{name}`", "", "```python",
                      signature(function, name, method=not isinstance(value, staticmethod)), "```", "",
                      doc, ""]
    return lines


def entry(qualified: str, obj) -> list[str]:
    """The section of one name: heading, signature (or value), docstring, members."""
    name = qualified.rsplit(".", 1)[-1]
    lines = [f"### `{qualified}`", ""]
    if inspect.isclass(obj) and issubclass(obj, enum.Enum):
        members_text = ", ".join(f"`{member.name}` ({member.value!r})" for member in obj)
        lines += [f"An enumeration: {members_text}.", "", docstring(obj), ""]
    elif inspect.isclass(obj):
        bases = [f"`{base.__name__}`" for base in obj.__bases__ if base is not object]
        lines += ["```python", f"class {signature(obj, name)}", "```", ""]
        if bases:
            lines += [f"A subclass of {', '.join(bases)}.", ""]
        lines += [docstring(obj), ""] + members(obj)
    elif callable(obj):
        lines += ["```python", signature(obj, name), "```", "", docstring(obj), ""]
    else:
        value = repr(obj)
        shown = value if len(value) <= 100 and " at 0x" not in value else f"a {type(obj).__name__}"
        lines += [f"A `{type(obj).__name__}`: `{shown}`.", "", docstring(type(obj)), ""]
    return lines


def page(title: str, about: str, sections: list[list[str]]) -> str:
    lines = [f"# {title}", "", about, ""]
    for section in sections:
        lines += section
    return HEADER + "\n".join(lines).rstrip() + "\n"


def _resolve(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def area_pages(api) -> dict[str, str]:
    placed = {name for _, _, names, _ in PAGES.values() for name in names}
    pages = {}
    for stem, (title, about, names, handed) in PAGES.items():
        sections = [entry(f"asyncdsl.{name}", getattr(api, name)) for name in names]
        if handed:
            sections.append(["## What kernel code is handed", ""])
            sections += [entry(dotted.rsplit(".", 1)[-1], _resolve(dotted)) for dotted in handed]
        pages[f"{stem}.md"] = page(title, about, sections)
    unplaced = [name for name in api.__all__
                if name not in placed and not _is_error(getattr(api, name))
                and not _is_dtype(getattr(api, name))]
    if unplaced:
        raise SystemExit(f"no reference page for {', '.join(unplaced)}: add them to PAGES in {__file__}")
    missing = sorted(placed - set(api.__all__))
    if missing:
        raise SystemExit(f"PAGES names {', '.join(missing)}, which asyncdsl.__all__ does not: "
                         f"remove them from {__file__}")
    return pages


def _is_error(obj) -> bool:
    return inspect.isclass(obj) and issubclass(obj, (BaseException, Warning))


def _is_dtype(obj) -> bool:
    from asyncdsl.dtypes import DType

    return isinstance(obj, DType) or obj is DType


def errors_page(api) -> str:
    """The error classes, the base first, each with what it means (its docstring)."""
    errors = [name for name in api.__all__ if _is_error(getattr(api, name))]
    errors.sort(key=lambda name: (getattr(api, name) is not api.AsyncDSLError,
                                  issubclass(getattr(api, name), Warning), name))
    return page("Errors and warnings",
                "What asyncdsl raises when a kernel, its arguments or its run break a rule, and the "
                "warning it gives when a kernel runs but slower than it could.  Every error names the "
                "user's source line where one is known.",
                [entry(f"asyncdsl.{name}", getattr(api, name)) for name in errors])


def dtypes_page(api) -> str:
    from asyncdsl import dtypes

    found = [name for name in api.__all__ if isinstance(getattr(api, name), dtypes.DType)]
    aliases = {name: sorted(alias for alias, value in dtypes._ALIASES.items()
                            if value is getattr(api, name))
               for name in found}
    table = ["| name | bits | kind | also written | numpy type |", "| --- | --- | --- | --- | --- |"]
    table += [f"| `asyncdsl.{name}` | {getattr(api, name).bits} | {getattr(api, name).kind} | "
              f"{', '.join(f'`{alias}`' for alias in aliases[name]) or ''} | "
              f"`{getattr(api, name).numpy_name}` |" for name in found]
    return page("Element types",
                "The element types kernels move and compute on.  Wherever an element type is asked "
                "for, its name as a string (`\"bf16\"`), a numpy dtype or a torch/JAX/CuPy dtype "
                "works too.",
                [table + [""], entry("asyncdsl.DType", api.DType),
                 ["### Where the text comes from", "", docstring(dtypes), ""]])


def public_modules(package) -> list:
    """The package's public modules, by name."""
    names = sorted(info.name for info in pkgutil.iter_modules(package.__path__)
                   if not info.name.startswith("_"))
    return [importlib.import_module(f"{package.__name__}.{name}") for name in names]


def library_page(stem: str, package_name: str) -> str:
    """A library package: its own `__all__`, then each public module's public names (its `__all__`,
    or the functions and classes it defines)."""
    package = importlib.import_module(package_name)
    sections = [[f"{docstring(package)}", ""]]
    for name in getattr(package, "__all__", []):
        sections.append(entry(f"{package_name}.{name}", getattr(package, name)))
    for module in public_modules(package):
        names = getattr(module, "__all__", None)
        if names is None:
            names = [name for name, value in vars(module).items()
                     if not name.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value))
                     and value.__module__ == module.__name__]
        sections.append([f"## `{module.__name__}`", "", docstring(module), ""])
        sections += [entry(f"{module.__name__}.{name}", getattr(module, name)) for name in names]
    title = "The kernel library" if stem == "library-kernels" else "Building blocks"
    return page(f"{title}: `{package_name}`", "", sections)


def index_page(api) -> str:
    lines = ["# API reference", "",
             "Every public name of `asyncdsl` (`asyncdsl.__all__`) and of the library packages, with "
             "its signature and docstring.  Kernel code imports the package as `import asyncdsl as "
             "ad`, so `asyncdsl.async_copy` is written `ad.async_copy`.", ""]
    for stem, (title, about, names, _) in PAGES.items():
        lines += [f"- [{title}]({stem}.md): {', '.join(f'`{name}`' for name in names)}"]
    errors = [name for name in api.__all__ if _is_error(getattr(api, name))]
    lines += ["- [Element types](element-types.md): `DType` and the types themselves",
              f"- [Errors and warnings](errors.md): {', '.join(f'`{name}`' for name in sorted(errors))}"]
    for stem, package in LIBRARIES.items():
        lines += [f"- [`{package}`]({stem}.md)"]
    return HEADER + "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """File name -> text of every page of docs/reference."""
    import asyncdsl as api

    written = area_pages(api)
    written["element-types.md"] = dtypes_page(api)
    written["errors.md"] = errors_page(api)
    for stem, package in LIBRARIES.items():
        written[f"{stem}.md"] = library_page(stem, package)
    written["index.md"] = index_page(api)
    return written


def main() -> int:
    written = pages()
    for stale in HERE.glob("*.md"):
        if stale.name not in written:
            stale.unlink()
    for name, text in written.items():
        (HERE / name).write_text(text)
    print(f"wrote {len(written)} pages to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
