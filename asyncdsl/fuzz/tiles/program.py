"""A tile program as data: its kernel's lines, its input arrays, and for each output array the
values the model expects there and how they are compared."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .numerics import FORMATS, INTEGERS, wide


def numpy_dtype(dtype: str):
    if dtype in FORMATS:
        return FORMATS[dtype].numpy
    return np.bool_ if dtype == "bool" else INTEGERS[dtype]


@dataclass
class Output:
    """An output array: what it holds before the launch, and what it must hold after.

    `exact`: every element equal (NaN matching any NaN); otherwise each element within `bound`
    (absolute, float64) of `expected`, or within `ulps` of it, or under `floor` in magnitude where
    `expected` is too, or (where `dont_care`) anything."""

    name: str
    initial: np.ndarray
    expected: np.ndarray
    exact: bool = True
    bound: np.ndarray | None = None
    ulps: float = 0.0
    floor: float = 0.0
    dont_care: np.ndarray | None = None
    what: str = ""  # the step that wrote it, for reports

    def differences(self, got: np.ndarray) -> np.ndarray:
        """A bool array: where `got` breaks what the model allows."""
        want, have = wide(self.expected), wide(got)
        both_nan = np.isnan(want) & np.isnan(have)
        with np.errstate(invalid="ignore"):
            if self.exact:
                same = (want == have) & (np.signbit(want) == np.signbit(have))
                wrong = ~(same | both_nan)
            else:
                close = np.zeros(want.shape, bool)
                if self.bound is not None:
                    close |= np.abs(have - want) <= self.bound
                if self.ulps:
                    _, exponent = np.frexp(np.where(np.isfinite(want), want, 1.0))
                    ulp = np.ldexp(1.0, np.maximum(exponent - 24, -149))
                    close |= np.abs(have - want) <= self.ulps * ulp
                if self.floor:
                    close |= (np.abs(want) < self.floor) & (np.abs(have) < self.floor)
                close |= (want == have) | both_nan
                wrong = ~close
        if self.dont_care is not None:
            wrong &= ~self.dont_care
        return wrong


@dataclass
class Program:
    name: str
    lines: list[str]  # the kernel's body
    inputs: list[tuple[str, np.ndarray]]
    outputs: list[Output]
    steps: list[str] = field(default_factory=list)  # the kinds of step drawn, for the summary
    decorator: str = "@ad.kernel(grid=(1,))"

    @property
    def parameters(self) -> list[str]:
        return [name for name, _ in self.inputs] + [output.name for output in self.outputs]

    def arrays(self) -> list[np.ndarray]:
        """Fresh copies of the kernel's arguments, inputs then outputs."""
        return [array.copy() for _, array in self.inputs] + [o.initial.copy() for o in self.outputs]
