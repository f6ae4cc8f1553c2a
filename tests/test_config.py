"""The environment knobs: flags follow the environment as it changes while the process runs."""

from __future__ import annotations

import pytest

from asyncdsl.config import knobs


@pytest.mark.parametrize("value, expected", [("1", True), (" On ", True), ("yes", True), ("0", False),
                                             ("false", False), ("", False), ("OFF", False)])
def test_flags_read_the_current_environment(monkeypatch, value, expected):
    monkeypatch.setenv("ASYNCDSL_DEBUG", value)
    monkeypatch.setenv("ASYNCDSL_INTERPRET", value)
    assert knobs.debug is expected and knobs.interpret is expected
    monkeypatch.delenv("ASYNCDSL_DEBUG")
    assert knobs.debug is False and knobs.interpret is expected
