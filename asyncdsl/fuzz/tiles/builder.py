"""The state a program is drawn in: the kernel's lines so far and, beside them, the model's value
of each tile they name (`t`, the tile the steps work on; `u`, a second tile loaded once).

Drawing and modelling go together: a step is drawn, written as kernel lines and applied to the
model's arrays at once, so a later step can look at the values (a sum is broadcast back only
where every order of addition gives the same bits; a divisor is never zero)."""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt

from . import numerics as nx
from .program import Output, Program, numpy_dtype

FLOATS = ("float32", "bfloat16", "float16")
FLOAT_CONSTANTS = (0.5, 2.0, -1.0, 3.0, 0.25, -0.75, 1.5, 0.1, 7.0, -3.0, 0.001, 100.0, 1.0, -2.5)
INT_CONSTANTS = (-7, -3, -2, -1, 1, 2, 3, 5, 8, 13, 64, 1000)


class Builder:
    def __init__(self, name: str, rnd: random.Random, rng: np.random.Generator, exact_only: bool):
        self.name, self.rnd, self.rng = name, rnd, rng
        self.exact_only = exact_only  # only steps whose every output bit is defined (the GPU test)
        self.lines: list[str] = []
        self.inputs: list[tuple[str, np.ndarray]] = []
        self.outputs: list[Output] = []
        self.steps: list[str] = []
        self.shape: tuple[int, ...] = ()
        self._t: np.ndarray | None = None
        self.dt = ""
        self._u: np.ndarray | None = None
        self.u_dt = ""
        self._names = 0

    # The models of the program's two tiles: the first steps (`generate.py`) set both before any
    # other step reads them.
    @property
    def t(self) -> np.ndarray:
        if self._t is None:
            raise RuntimeError("a step read the tile t before the program loaded it")
        return self._t

    @property
    def u(self) -> np.ndarray:
        if self._u is None:
            raise RuntimeError("a step read the tile u before the program made it")
        return self._u

    @u.setter
    def u(self, value: np.ndarray) -> None:
        self._u = value

    # -- writing -----------------------------------------------------------------------------------
    def emit(self, *lines: str) -> None:
        self.lines.extend(lines)

    def fresh(self, stem: str) -> str:
        self._names += 1
        return f"{stem}{self._names}"

    def add_input(self, name: str, array: np.ndarray) -> None:
        self.inputs.append((name, array))

    def add_output(
        self, expected: npt.ArrayLike, what: str, initial: np.ndarray | None = None, **compare
    ) -> str:
        name = f"o{len(self.outputs)}"
        expected = np.asarray(expected)
        shape = expected.shape or (1,)
        if initial is None:
            initial = self.poison(shape, expected.dtype)
        for key in ("bound", "dont_care"):  # per element, in the output's shape
            if compare.get(key) is not None:
                compare[key] = np.broadcast_to(
                    np.asarray(compare[key]).reshape(expected.shape), expected.shape
                ).reshape(shape)
        self.outputs.append(Output(name, initial, expected.reshape(shape), what=what, **compare))
        return name

    def poison(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An output's contents before the launch: values no step computes by chance."""
        if np.dtype(dtype).kind in "fV":  # ml_dtypes' floats are of kind V
            return np.full(shape, -12345.0).astype(dtype)
        return np.full(shape, -123456789 if np.dtype(dtype).itemsize == 4 else -99).astype(dtype)

    def program(self) -> Program:
        return Program(self.name, self.lines, self.inputs, self.outputs, self.steps)

    # -- drawing -----------------------------------------------------------------------------------
    def pick(self, options):
        return self.rnd.choice(list(options))

    def chance(self, p: float) -> bool:
        return self.rnd.random() < p

    def weighted(self, pairs):
        names, weights = zip(*pairs)
        return self.rnd.choices(names, weights)[0]

    def constant(self, dtype: str | None = None) -> str:
        """A Python number for a tile of `dtype` (floats for float tiles, ints for int32)."""
        dtype = dtype or self.dt
        return repr(self.pick(FLOAT_CONSTANTS if nx.is_float(dtype) else INT_CONSTANTS))

    def values(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        """Random input values: mostly small dyadic numbers (sums stay exact), sometimes normal
        numbers of any scale, sometimes with NaN, ±inf, ±0 and subnormals among them."""
        rng = self.rng
        if not nx.is_float(dtype):
            high = self.pick((20, 1000, 2**31 - 1))
            return rng.integers(-high, high, shape, endpoint=True).astype(numpy_dtype(dtype))
        mode = self.weighted((("grid", 6), ("normal", 3), ("special", 1)))
        if mode == "grid":
            raw = rng.integers(-16, 17, shape) / 2.0 ** self.pick((0, 1, 2, 3))
        else:
            raw = rng.standard_normal(shape) * 2.0 ** self.pick((-20, -3, 0, 4, 12))
        if mode == "special":
            specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0**-140, -(2.0**-20)])
            where = rng.random(shape) < 0.05
            raw = np.where(where, specials[rng.integers(0, len(specials), shape)], raw)
        return nx.round_to(raw, dtype)

    # -- the two tiles -----------------------------------------------------------------------------
    def set_t(self, line: str, value: np.ndarray, dtype: str | None = None) -> None:
        self.emit(line)
        self._t = (
            np.broadcast_to(value, self.shape).astype(value.dtype) if value.shape != self.shape else value
        )
        if dtype:
            self.dt = dtype

    def u_as(self, dtype: str) -> tuple[str, np.ndarray]:
        """The second tile in `dtype`: its expression and its model."""
        if self.u_dt == dtype:
            return "u", self.u
        return f"u.astype(ad.{dtype})", nx.convert(self.u, self.u_dt, dtype)

    def operand(self) -> tuple[str, np.ndarray | np.int32]:
        """A second operand for `t`: the tile `u` in t's dtype, or a Python number."""
        if self.chance(0.5):
            return self.u_as(self.dt)
        text = self.constant()
        return text, nx.constant(eval(text), self.dt)  # noqa: S307 - one of our own literals
