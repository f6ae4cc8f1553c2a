"""The library's host-side dispatch helpers: `flag`, the yes/no keywords of host functions and
operators, refuses what is no truth value at the caller's line."""

from __future__ import annotations

import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl.kernels.dispatch import flag, on_host


@pytest.mark.parametrize("value,expected", [(True, True), (False, False), (1, True), (0, False),
                                            (np.bool_(True), True), (np.int64(0), False)])
def test_truth_values_are_taken(value, expected):
    assert flag(value, "causal") is expected


@pytest.mark.parametrize("value", ["no", 2, -1, None, 0.0, [True]])
def test_other_values_are_refused_at_the_callers_line(value):
    with pytest.raises(ad.ArgumentError) as caught:
        flag(value, "causal")  # the line named
    message = str(caught.value)
    assert "causal is a flag" in message and repr(value) in message and "test_dispatch.py" in message


def test_numpy_arrays_run_on_the_host_and_lists_of_them_too():
    assert on_host(np.zeros(2)) and on_host([np.zeros(2), np.zeros(2)])
    assert not on_host([]) and not on_host(memoryview(b"ab"))



def test_multiprocessors_are_those_of_the_arrays_device(monkeypatch):
    import dataclasses

    from runtime_fakes import device_facts_of
    from support import device_array

    from asyncdsl.kernels.dispatch import multiprocessors, walkers
    from asyncdsl.runtime import driver

    h200 = device_facts_of(9, 0)
    other = dataclasses.replace(h200, ordinal=1, multiprocessor_count=114)
    monkeypatch.setattr(driver, "_facts", {0: h200, 1: other})
    array = device_array((64, 32), 0x10000)
    assert multiprocessors(array) == walkers(array) == 132
    assert walkers(np.zeros(2), interpreted=5) == 5
    array.device = 1
    assert multiprocessors(array) == 114
    with pytest.raises(ad.ArgumentError, match="host"):
        multiprocessors([1.0, 2.0])  # no GPU array: refused as a kernel argument would be
