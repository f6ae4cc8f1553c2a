"""`import asyncdsl` stays light: what only some calls need is imported by those calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# cuda-python: only a GPU launch needs it; ml_dtypes: only bfloat16/fp8/4-bit numpy arrays and
# float8 constants; the interpreter and xDSL's interpreters: only interpreted calls; torch: only
# asyncdsl.torch.
DEFERRED = ("cuda.bindings", "ml_dtypes", "asyncdsl.interpret", "xdsl.interpreters", "torch")


def test_import_loads_nothing_only_some_calls_need():
    code = f"import sys, asyncdsl; print([m for m in {DEFERRED!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"


def test_a_first_trace_to_ptx_leaves_them_unloaded_too():
    code = (
        "import sys, asyncdsl as ad\n"
        "from asyncdsl.examples.tile_copy import tile_copy\n"
        "spec = ad.ArraySpec((1000, 528), ad.float32)\n"
        "assert '.entry tile_copy' in tile_copy.ptx(spec, spec, BM=64, BN=64)\n"
        f"print([m for m in {DEFERRED!r} if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"
