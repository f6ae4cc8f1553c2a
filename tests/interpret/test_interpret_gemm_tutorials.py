"""The GEMM tutorials (`asyncdsl.examples.wgmma_gemm`, `persistent_gemm`) run as programs in the
interpreter and are exact (small integers: every sum exact)."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("name", ["wgmma_gemm", "persistent_gemm"])
def test_the_gemm_tutorial_is_exact_in_the_interpreter(name, capsys):
    assert importlib.import_module(f"asyncdsl.examples.{name}").main() == 0
    assert "on the interpreter: exact" in capsys.readouterr().out
