"""Helpers the test modules share: arrays of random bits and poisoned outputs (copies move bytes,
so tests compare bytes), and checks that an error names the rule and the user's line."""

from __future__ import annotations

import inspect
import math
import sys

import numpy as np
import pytest
from hypothesis import settings

import asyncdsl as ad


def examples(count: int) -> int:
    """How many examples a property test that names `count` draws under the loaded hypothesis
    profile: `count` scaled as the profile scales hypothesis's default of 100 (conftest.py's
    profiles: half in the default one CI runs, all under `--hypothesis-profile=deep`), and never
    fewer than 20 where `count` asks for more."""
    return max(min(count, 20), count * settings.default.max_examples // 100)


POISON = 0xA5  # a byte no copy writes by chance: output bytes a copy should not touch keep it


def device_array(shape, address: int, dtype: ad.DType = ad.float32):
    """A contiguous `DeviceArray` at a made-up address: what launch-path tests pass where no GPU
    memory is touched."""
    from asyncdsl.hw.gmem_runs import contiguous_strides
    from asyncdsl.runtime.arrays import DeviceArray

    return DeviceArray(address, tuple(shape), contiguous_strides(tuple(shape)), dtype, 0)


def random_bits(shape, dtype: ad.DType, seed: int | np.random.Generator = 0) -> np.ndarray:
    """An array of `dtype` with random bytes (NaN payloads and all: copies move bits), from a
    seed or from a generator the caller keeps drawing from."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(*shape, dtype.itemsize), dtype=np.uint8)
    return raw.view(dtype.numpy).reshape(shape)


def poisoned(shape, dtype: ad.DType) -> np.ndarray:
    """An output array whose every byte is POISON."""
    out = np.empty(shape, dtype.numpy)
    out.view(np.uint8)[...] = POISON
    return out


def raw(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).view(np.uint8).tobytes()


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def line_of(fn, text: str) -> int:
    """The absolute line number of the first line of `fn`'s source containing `text`."""
    lines, first = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if text in line:
            return first + offset
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def expect(error_type, kernel, args, kwargs, *fragments, line_text: str | None = None):
    """Compiling `kernel(*args, **kwargs)` raises `error_type` with every fragment in its message
    and, given `line_text`, located at the line of the kernel's source (in the kernel's own
    module) that holds it. Returns the error."""
    with pytest.raises(error_type) as caught:
        kernel.compile(*args, **kwargs)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    if line_text is not None:
        location = caught.value.location
        assert location is not None, message
        expected = (sys.modules[kernel.fn.__module__].__file__, line_of(kernel.fn, line_text))
        assert (location.file, location.line) == expected, message
    return caught.value


class Traced:
    """A stand-in for a traced index: records arithmetic as an expression, refuses to become an
    int or a bool (what the transform algebra and the planner must never ask of a traced value),
    and knows what it is a multiple of as the compiler's analysis would (`known_divisor`)."""

    def __init__(self, expr, known_divisor: int = 1):
        self.expr = expr
        self.known_divisor = known_divisor

    def _op(self, op, other, divisor):
        text = other.expr if isinstance(other, Traced) else repr(other)
        return Traced(f"({self.expr} {op} {text})", divisor)

    @staticmethod
    def _divisor(other):
        return other.known_divisor if isinstance(other, Traced) else abs(other)

    def __add__(self, other):
        return self._op("+", other, math.gcd(self.known_divisor, self._divisor(other)))

    def __sub__(self, other):
        return self._op("-", other, math.gcd(self.known_divisor, self._divisor(other)))

    def __mul__(self, other):
        return self._op("*", other, self.known_divisor * self._divisor(other))

    def __floordiv__(self, other):
        d = self.known_divisor
        return self._op("//", other, d // other if isinstance(other, int) and d % other == 0 else 1)

    def __mod__(self, other):
        return self._op("%", other, math.gcd(self.known_divisor, other) if isinstance(other, int) else 1)

    def __int__(self):
        raise AssertionError("a traced index was converted to int")

    __index__ = __int__

    def __bool__(self):
        raise AssertionError("a traced index was used as a bool")

    def eval(self, **env):
        return eval(self.expr, {}, env)


def evaluated(values, env: dict) -> tuple:
    """`values` with every Traced one evaluated with the variables `env`."""
    return tuple(v.eval(**env) if isinstance(v, Traced) else v for v in values)


class HostTensor:
    """Stands for a torch CPU tensor: numpy reads it through `__array__`; its repr, like
    torch's, elides the middle of a long one."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values

    def __repr__(self):
        return f"tensor([{self.values[0]}, ..., {self.values[-1]}])"


class DeviceTensor(HostTensor):
    """Stands for a tensor on the GPU: numpy cannot read it, as torch refuses a CUDA tensor."""

    def __array__(self, dtype=None, copy=None):
        raise TypeError("can't convert cuda:0 device type tensor to numpy")
