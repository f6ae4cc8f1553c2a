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
