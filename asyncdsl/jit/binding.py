"""Binding a call's arguments to a kernel's parameters.

A parameter annotated `constexpr` is compiled in; one annotated `int` or `float`, or given a
Python or numpy number, is a runtime scalar: a kernel parameter whose value never recompiles
(only whether an int is a multiple of 16 does); any other is an array.  `KernelSignature` reads
the kernel function's parameters once; `bind` makes a `BoundCall` of one call's arguments, and
`BoundCall.specs` is what the call's specialisation is keyed on.  Binding is its own step, apart
from compiling and launching, so that its result can be kept for arguments of one layout.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from asyncdsl.errors import ArgumentError, SourceLocation, TraceError
from asyncdsl.jit.specs import ArraySpec, ScalarSpec, scalar_kind
from asyncdsl.kernel_binary import scalar_argument


if TYPE_CHECKING:  # to a type checker, a constexpr parameter is whatever value the call passes
    constexpr = Any
else:
    class constexpr:  # noqa: N801 - spelled like Triton's `tl.constexpr`, which users know
        """Annotation for kernel parameters whose values are known while tracing
        (`BLOCK: asyncdsl.constexpr`). Each distinct value compiles its own specialisation.
        One whose default is True or False is a flag (`CAUSAL: asyncdsl.constexpr = False`): a
        call gives it True or False (or 1 or 0, which the kernel sees as True or False); any other
        value is an `ArgumentError`."""


def declared_kind(annotation: Any) -> str | None:
    """What a parameter's annotation fixes: "constexpr", a runtime "int" or "float", or None (the
    value decides).  Annotations may be strings (`from __future__ import annotations`)."""
    if annotation is constexpr:
        return "constexpr"
    if annotation is int or annotation is float:
        return annotation.__name__
    if isinstance(annotation, str) and annotation.split(".")[-1] in ("constexpr", "int", "float"):
        return annotation.split(".")[-1]
    return None


@dataclass(frozen=True)
class BoundCall:
    """One call's arguments: the runtime ones (arrays and scalars, in signature order) with the
    kind of each ("int", "float", or None for an array), and the constexpr values."""

    runtime: tuple[tuple[str, Any], ...]
    kinds: tuple[str | None, ...]
    constexprs: Mapping[str, Any]

    def by_name(self) -> dict[str, Any]:
        return {**dict(self.runtime), **self.constexprs}

    def arrays(self) -> list[tuple[str, Any]]:
        return [argument for argument, kind in zip(self.runtime, self.kinds) if kind is None]

    def scalars(self) -> list[int | float]:
        """The scalar arguments as the kernel receives them (ints checked, floats in float32)."""
        return [
            scalar_argument(kind, value, name)
            for (name, value), kind in zip(self.runtime, self.kinds) if kind
        ]

    def with_arrays(self, arrays: Mapping[str, Any]) -> BoundCall:
        """This call with the arrays named in `arrays` replaced."""
        runtime = tuple((name, arrays.get(name, value)) for name, value in self.runtime)
        return BoundCall(runtime, self.kinds, self.constexprs)

    def specs(self, location: SourceLocation | None) -> tuple[ArraySpec | ScalarSpec, ...]:
        """Each runtime argument's spec (an array's shape and dtype, a scalar's kind), the
        errors of an argument that has none at the caller's line."""
        try:
            return tuple(
                ArraySpec.of(value, name) if kind is None else ScalarSpec.of(kind, value, name)
                for (name, value), kind in zip(self.runtime, self.kinds)
            )
        except TraceError as error:
            raise ArgumentError(error.message, location) from None
        except ArgumentError as error:
            raise error.at(location) from None


class KernelSignature:
    """A kernel function's parameters: which are constexprs, which runtime scalars (and of which
    kind), which arrays, and their defaults."""

    def __init__(self, fn: Callable, definition: SourceLocation | None):
        self._signature = inspect.signature(fn)
        self.kernel_name = fn.__name__
        parameters = self._signature.parameters
        for parameter in parameters.values():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise TraceError(f"kernel {fn.__name__} cannot take *args or **kwargs", definition)
        self.parameters = tuple(parameters)
        self.defaults = {name: p.default for name, p in parameters.items() if p.default is not p.empty}
        declared = {name: declared_kind(p.annotation) for name, p in parameters.items()}
        self.constexpr_names = tuple(n for n, kind in declared.items() if kind == "constexpr")
        self.runtime_names = tuple(n for n, kind in declared.items() if kind != "constexpr")
        self.scalar_kinds = {n: kind for n, kind in declared.items() if kind in ("int", "float")}
        # A flag's value is only tested for truth while tracing, so a value that is no truth value
        # (2, "no", None) would compile silently as one; binding refuses it instead.
        self.flags = tuple(n for n in self.constexpr_names if isinstance(self.defaults.get(n), bool))

    def bind(self, args: tuple, kwargs: dict, location: SourceLocation | None) -> BoundCall:
        """The call `(*args, **kwargs)` bound to these parameters, defaults applied; errors at
        `location`, the caller's line."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise ArgumentError(
                f"{self.kernel_name}({', '.join(self.parameters)}): {error}", location
            ) from None
        bound.apply_defaults()
        values = bound.arguments
        runtime_values = tuple((n, values[n]) for n in self.runtime_names)
        try:
            kinds = tuple(self.scalar_kinds.get(n) or scalar_kind(values[n], n) for n in self.runtime_names)
        except ArgumentError as error:
            raise error.at(location) from None
        # numpy scalars mean their Python values (shapes, sizes and cache keys want those).
        constexprs = {n: _python_scalar(values[n]) for n in self.constexpr_names}
        for n, v in constexprs.items():
            try:
                hash(v)
            except TypeError:
                raise ArgumentError(f"constexpr {n} must be hashable, got {type(v).__name__}",
                                    location) from None
        for n in self.flags:
            if not is_truth_value(constexprs[n]):
                raise ArgumentError(
                    f"{self.kernel_name}'s constexpr {n} is a flag (its default is {self.defaults[n]}): "
                    f"it takes True or False (or 1 or 0), got {constexprs[n]!r}", location)
            # as a bool, a flag is one to the options it is passed on to (`approx=`, which
            # refuses 1) and one specialisation whether a call gave 1 or True
            constexprs[n] = bool(constexprs[n])
        return BoundCall(runtime_values, kinds, constexprs)


def is_truth_value(value: Any) -> bool:
    """True, False, 1 or 0, numpy's too: what a flag takes (a constexpr whose default is a bool,
    a host function's `causal=`)."""
    return isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1))


def _python_scalar(value: Any) -> Any:
    """A constexpr as the Python value it stands for: numpy integers as ints, numpy floats as
    floats; bools (Python's, and numpy's, which is no `numbers` type) stay bools."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, float):
        return float(value)
    return value
