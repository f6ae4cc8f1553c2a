"""What a specialisation of a kernel knows of its arguments before tracing: each runtime
argument's spec (an array's shape and dtype, `ArraySpec`; a runtime scalar's kind, `ScalarSpec`,
which for an int also says whether the value is a multiple of 16).

Plain records: binding a call and keying its specialisation needs no IR, so `import asyncdsl`
and a launch of a kernel compiled earlier never load the compiler (`jit/specialize.py` traces).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from asyncdsl import dtypes
from asyncdsl.errors import ArgumentError, TraceError, user_location
from asyncdsl.kernel_binary import INT_SPECIALIZATION_DIVISOR, scalar_argument


@dataclass(frozen=True)
class ArraySpec:
    """What tracing needs to know of an array argument: its shape and element type."""

    shape: tuple[int, ...]
    dtype: dtypes.DType

    def __post_init__(self):
        """Take any sequence of integers (numpy's too) as the shape and anything `dtypes.as_dtype`
        reads as the dtype; refuse the rest here, at the line that made the spec, rather than as
        an internal error when a kernel is traced with it."""
        shape = self.shape
        try:
            dims = tuple(shape)
        except TypeError:
            dims = None
        if dims is None or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0
                                   for d in dims):
            raise ArgumentError(
                f"ArraySpec: the shape must be a sequence of non-negative ints, got {shape!r}",
                user_location())
        try:
            dtype = dtypes.as_dtype(self.dtype)
        except ArgumentError as error:
            raise ArgumentError(f"ArraySpec: {error.message}", user_location()) from None
        object.__setattr__(self, "shape", tuple(int(d) for d in dims))  # frozen: set once, normalised
        object.__setattr__(self, "dtype", dtype)

    @staticmethod
    def of(array: object, name: str) -> ArraySpec:
        if isinstance(array, ArraySpec):
            return array
        shape, dtype = getattr(array, "shape", None), getattr(array, "dtype", None)
        if shape is None or dtype is None:
            raise TraceError(
                f"argument {name!r} must be an array (with .shape and .dtype), got {type(array).__name__}")
        shape = tuple(int(d) for d in shape)
        if not shape:
            raise TraceError(f"argument {name!r} is a 0-d array; kernels take arrays of rank >= 1")
        try:
            return ArraySpec(shape, dtypes.as_dtype(dtype))
        except ArgumentError as error:
            raise TraceError(f"argument {name!r}: {error.message}") from None


@dataclass(frozen=True)
class ScalarSpec:
    """What tracing needs to know of a runtime scalar argument: "int" or "float", and the number
    an int is known to be a multiple of (`INT_SPECIALIZATION_DIVISOR` or 1).

    As Triton does, an int that is a multiple of 16 compiles a kernel that knows it (what TMA and
    bulk copies need proven of starts); every other int value shares one kernel."""

    kind: str
    divisor: int = 1

    @staticmethod
    def of(kind: str, value: object, name: str) -> ScalarSpec:
        """The spec of `value` passed as runtime `kind` argument `name`: a number, or the type
        `int`/`float` itself for "some value" (as in `kernel.ptx(x, n=int)`)."""
        if value is int or value is float:
            if kind == "int" and value is float:
                raise ArgumentError(
                    f"argument {name!r} of the kernel is a runtime int, but got the type float")
            return ScalarSpec(kind)
        number = scalar_argument(kind, value, name)
        divisible = kind == "int" and number % INT_SPECIALIZATION_DIVISOR == 0
        return ScalarSpec(kind, INT_SPECIALIZATION_DIVISOR if divisible else 1)


def scalar_kind(value: object, name: str) -> str | None:
    """The runtime kind a value passed for an unannotated parameter makes it: "int" for an
    integer, "float" for another real number (numpy's too, and the types themselves), None for
    anything else (an array)."""
    if isinstance(value, bool):
        raise ArgumentError(
            f"argument {name!r} is a bool; runtime scalars are ints and floats: pass int({name}), or "
            f"annotate the parameter `{name}: asyncdsl.constexpr` to compile with its value"
        )
    if value is int or isinstance(value, numbers.Integral):
        return "int"
    if value is float or isinstance(value, numbers.Real):
        return "float"
    return None
