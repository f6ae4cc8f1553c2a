"""`import asyncdsl` stays light: what only some calls need is imported by those calls."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# cuda-python: only a GPU launch needs it; ml_dtypes: only bfloat16/fp8/4-bit numpy arrays and
# float8 constants; the interpreter and xDSL's interpreters: only interpreted calls; torch: only
# asyncdsl.torch.
DEFERRED = ("cuda.bindings", "ml_dtypes", "asyncdsl.interpret", "xdsl.interpreters", "torch")


def loaded_after(code: str, watched: tuple[str, ...]) -> list[str]:
    """Which of the `watched` modules a fresh Python process has loaded after running `code`."""
    probe = f"{code}\nimport sys\nprint([m for m in {watched!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def test_import_loads_nothing_only_some_calls_need():
    assert loaded_after("import asyncdsl", DEFERRED) == []


def test_importing_the_kernel_library_leaves_them_unloaded_too():
    # ml_dtypes alone took longer to import than the whole library: only numpy references need it.
    assert loaded_after("import asyncdsl.kernels", DEFERRED) == []


TILE_COPY_PTX = (
    "import sys, asyncdsl as ad\n"
    "from asyncdsl.examples.tile_copy import tile_copy\n"
    "spec = ad.ArraySpec((1000, 528), ad.float32)\n"
    "assert '.entry tile_copy' in tile_copy.ptx(spec, spec, BM=64, BN=64)"
)


def test_a_first_trace_to_ptx_leaves_them_unloaded_too():
    assert loaded_after(TILE_COPY_PTX, DEFERRED) == []


def test_a_launch_of_a_kernel_on_disk_leaves_the_compiler_unloaded():
    # What a call does before it needs the GPU, when its kernel comes from the disk cache (the
    # examples' kernels and the library's): bind
    # the arguments, their specs, the grid (grid functions use `ad.cdiv`), the disk key.  None of
    # it may import xDSL: doing so cost such a first call half a second (docs/hardware.md §19).
    code = (
        "import importlib, pkgutil, sys, asyncdsl as ad, asyncdsl.examples, asyncdsl.kernels\n"
        "kernels = 0\n"
        "for package in (asyncdsl.examples, asyncdsl.kernels):\n"
        "  for info in pkgutil.iter_modules(package.__path__):\n"
        "    module = importlib.import_module(f'{package.__name__}.{info.name}')\n"
        "    for name, (specs, constexprs) in getattr(module, 'EXAMPLE_ARGS', {}).items():\n"
        "        kernel = getattr(module, name)\n"
        "        call = kernel.signature.bind(specs, constexprs, None)\n"
        "        kernel.grid_rule.for_call(call, None)\n"
        "        key = kernel.specializations.disk_key(call.specs(None), call.constexprs, False, 1)\n"
        "        assert key is not None\n"
        "        kernels += 1\n"
        "print(kernels, [m for m in ('xdsl', 'asyncdsl.dialects', 'asyncdsl.passes') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    count, loaded = done.stdout.strip().split(" ", 1)
    assert int(count) >= 20 and loaded == "[]"


# What a first compile of a TMA tile copy has no use for: the lowering rules of register tiles,
# tensor cores and the other copy engines, and the op modules of features it does not use.  The
# compiler loads the op modules of the ops a kernel's IR holds (dialects/asyncdsl.py) and their
# rules (lower_to_ptx.RULE_MODULES); the whole dialect loads only to parse IR text.
NOT_FOR_A_TILE_COPY = (
    "asyncdsl.passes.to_ptx.tiles", "asyncdsl.passes.to_ptx.tile_access", "asyncdsl.passes.to_ptx.tile_gmem",
    "asyncdsl.passes.to_ptx.registers", "asyncdsl.passes.to_ptx.wgmma", "asyncdsl.passes.to_ptx.bulk",
    "asyncdsl.passes.to_ptx.cp_async", "asyncdsl.passes.to_ptx.im2col", "asyncdsl.passes.to_ptx.row_gather",
    "asyncdsl.passes.to_ptx.prefetch", "asyncdsl.dialects.turns_ops", "asyncdsl.dialects.index_load_ops",
)


def test_a_first_compile_loads_the_compiler_parts_its_kernel_uses():
    code = TILE_COPY_PTX + "\nassert 'asyncdsl.passes.to_ptx.tma' in sys.modules"
    assert loaded_after(code, NOT_FOR_A_TILE_COPY) == []


# What a first compile of the library's softmax (register tiles, through the kernel language
# `asyncdsl.frontend.language`) has no use for: tensor cores, mutable registers, turns, other
# devices, the other copy engines.
NOT_FOR_A_SOFTMAX = (
    "asyncdsl.frontend.wgmma", "asyncdsl.frontend.registers", "asyncdsl.frontend.turns",
    "asyncdsl.frontend.distributed", "asyncdsl.frontend.im2col", "asyncdsl.frontend.row_gather",
    "asyncdsl.frontend.index_loads", "asyncdsl.passes.to_ptx.wgmma", "asyncdsl.passes.to_ptx.registers",
    "asyncdsl.passes.to_ptx.turns", "asyncdsl.passes.to_ptx.im2col", "asyncdsl.passes.to_ptx.row_gather",
)


def test_the_kernel_language_loads_the_modules_of_what_a_kernel_calls():
    code = (
        "import importlib\n"
        "module = importlib.import_module('asyncdsl.kernels.softmax')\n"
        "specs, constexprs = module.EXAMPLE_ARGS['softmax_rows']\n"
        "assert '.entry' in module.softmax_rows.ptx(*specs, **constexprs)"
    )
    assert loaded_after(code, NOT_FOR_A_SOFTMAX) == []


def test_a_warm_up_imports_the_whole_compiler_before_its_workers_fork():
    # Forked workers inherit what the parent imported: compiles in them must find every module
    # of the compiler loaded, not import what their kernels need each.
    code = (
        "import importlib, sys\n"
        "from asyncdsl.jit import warmup\n"
        "warmup._import_the_compiler()\n"
        "before = set(sys.modules)\n"
        "kernels = (('asyncdsl.kernels.softmax', 'softmax_rows'),\n"
        "           ('asyncdsl.kernels.gemm_cooperative', 'matmul'),\n"
        "           ('asyncdsl.examples.tile_copy', 'tile_copy'))\n"
        "for name, kernel in kernels:\n"
        "    module = importlib.import_module(name)\n"
        "    specs, constexprs = module.EXAMPLE_ARGS[kernel]\n"
        "    getattr(module, kernel).ptx(*specs, **constexprs)\n"
        "library = ('asyncdsl.kernels', 'asyncdsl.examples', 'asyncdsl.blocks')  # the kernels' own code\n"
        "print(sorted(m for m in set(sys.modules) - before if not m.startswith(library)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"
