"""What the backward kernels' tests share: the finite-difference gradient that checks each
float64 reference backward, errors against float64, and ptxas's report of spills."""

from __future__ import annotations

import re

import numpy as np

from asyncdsl.runtime.ptxas import assemble

_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def wide(*arrays):
    """The arrays in float64."""
    return tuple(np.asarray(a).astype(np.float64) for a in arrays)


def numerical_gradient(f, x: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """d f / d x of the scalar function f at x (float64) by central differences."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] += step
        minus[index] -= step
        grad[index] = (f(plus) - f(minus)) / (2 * step)
    return grad


def relative_error(got, expected) -> float:
    """The largest absolute error, relative to the largest expected magnitude."""
    got, expected = wide(got, expected)
    return float(np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-30))


def assert_no_spills(ptx: str) -> None:
    """ptxas -v reports for every function no stack frame and nothing spilled."""
    frames = _FRAME.findall(assemble(ptx, verbose=True)[1])
    assert frames and all(frame == ("0", "0", "0") for frame in frames), frames


def spilled_bytes(ptx: str) -> list[int]:
    """The bytes of spill stores ptxas -v reports for each function."""
    return [int(stores) for _, stores, _ in _FRAME.findall(assemble(ptx, verbose=True)[1])]
