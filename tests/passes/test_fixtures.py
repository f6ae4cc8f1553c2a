"""The textual pass tests in fixtures/: each fixture's module, run through the passes it names,
shows what its CHECK lines say (the runner is filecheck.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from filecheck import Fixture, check

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.mlir"))


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_fixture(path):
    fixture = Fixture.read(path)
    check(fixture.output(), fixture.checks)


OUTPUT = "a\n  b = 1\n  c = 2\nd\n"


@pytest.mark.parametrize("checks", [
    [("CHECK", "b ="), ("CHECK-NEXT", "c =")],
    [("CHECK", "a"), ("CHECK-NOT", "x"), ("CHECK", "d")],
    [("CHECK", "c"), ("CHECK-NOT", "b")],
    [("CHECK", "b"), ("CHECK", "= 1")],  # later on the same line
])
def test_checks_that_hold_pass(checks):
    check(OUTPUT, checks)


@pytest.mark.parametrize("checks", [
    [("CHECK", "e")],
    [("CHECK", "b ="), ("CHECK-NEXT", "d")],
    [("CHECK", "c"), ("CHECK", "b")],  # in order only
    [("CHECK", "a"), ("CHECK-NOT", "c"), ("CHECK", "d")],
    [("CHECK", "a"), ("CHECK-NOT", "d")],
    [("CHECK", "= 1"), ("CHECK", "b")],  # not before the last match on its line
])
def test_checks_that_fail_raise(checks):
    with pytest.raises(AssertionError):
        check(OUTPUT, checks)
