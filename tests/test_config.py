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


@pytest.mark.parametrize("variable, knob", [("ASYNCDSL_INTERPRET", "interpret"), ("ASYNCDSL_DEBUG", "debug"),
                                            ("ASYNCDSL_KERNEL_CACHE", "kernel_cache"),
                                            ("ASYNCDSL_PRINT_AUTOTUNING", "print_autotuning")])
def test_a_flag_that_is_neither_on_nor_off_is_refused_naming_the_variable(monkeypatch, variable, knob):
    import asyncdsl as ad

    monkeypatch.setenv(variable, "maybe")
    with pytest.raises(ad.ArgumentError, match=f"{variable}='maybe'"):
        getattr(knobs, knob)
    monkeypatch.delenv(variable)
    assert getattr(knobs, knob) is (knob == "kernel_cache")
