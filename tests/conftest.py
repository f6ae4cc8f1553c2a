"""Shared test fixtures: assembling PTX (plain helpers live in support.py)."""

from __future__ import annotations

import pytest

from asyncdsl.runtime.ptxas import assemble, find_ptxas

# The shared helpers (support.py) assert too: let pytest explain their failures as it does the tests'.
pytest.register_assert_rewrite("support")


@pytest.fixture(scope="session")
def ptxas():
    """Assemble PTX for sm_90a (the `test` extra installs ptxas; its absence is a failure)."""
    assert find_ptxas() is not None, "ptxas is required: pip install 'asyncdsl[test]'"

    def run(ptx: str, arch: str = "sm_90a") -> str:
        return assemble(ptx, arch)[1]

    return run
