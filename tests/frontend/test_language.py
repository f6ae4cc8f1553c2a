"""The kernel language as the library's kernel code sees it (`asyncdsl.frontend.language`): the
names `import asyncdsl as ad` gives a kernel body, with the same values, and the compiler loaded
only when a name that needs it is used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import asyncdsl
from asyncdsl.frontend import language

ROOT = Path(__file__).resolve().parent.parent.parent
HOST_SIDE = {"Kernel", "kernel", "constexpr", "ArraySpec", "PersistentGrid", "persistent_grid", "Autotuned",
             "Choice", "autotune", "Profile", "warmup", "WarmupReport", "Specialization",
             "seen_specializations", "save_workload", "load_workload"}


@pytest.mark.parametrize("name", sorted(set(asyncdsl.__all__) - HOST_SIDE))
def test_every_name_of_the_language_is_asyncdsls_own(name):
    assert getattr(language, name) is getattr(asyncdsl, name)


def test_a_name_the_language_has_not_is_an_attribute_error():
    with pytest.raises(AttributeError, match="the kernel language has no 'no_such_op'"):
        language.no_such_op  # noqa: B018


def test_host_code_s_names_leave_the_compiler_unloaded():
    code = ("import sys\nfrom asyncdsl.frontend import language as ad\n"
            "ad.cdiv(7, 2), ad.bfloat16, ad.float8_e4m3fn, ad.TraceError, ad.TileTransform, ad.strided\n"
            "print([m for m in ('xdsl', 'asyncdsl.dialects', 'asyncdsl.passes') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"
