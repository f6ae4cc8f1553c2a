"""Every example kernel and every kernel of the library, given a constexpr it cannot take (zero,
negative, odd, huge, a string, None, a float), refuses it with one of the project's errors, never
Python's own: they are what users copy and call with their own values first."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import asyncdsl as ad
import asyncdsl.examples
import asyncdsl.kernels

EXAMPLES = [importlib.import_module(f"{package.__name__}.{info.name}")
            for package in (asyncdsl.examples, asyncdsl.kernels)
            for info in pkgutil.iter_modules(package.__path__)]
BAD_VALUES = (0, -1, 3, 1000, "x", None, 2.5)


def _constexprs(kernel) -> list[str]:
    return [name for name, parameter in inspect.signature(kernel.fn).parameters.items()
            if "constexpr" in str(parameter.annotation)]


# The example kernels that take constexprs (a kernel of none, softmax_halves, has nothing to refuse).
KERNELS = [(module, name) for module in EXAMPLES for name in getattr(module, "EXAMPLE_ARGS", {})
           if _constexprs(getattr(module, name))]


@pytest.mark.parametrize("module,kernel_name", KERNELS, ids=[name for _, name in KERNELS])
def test_a_constexpr_an_example_cannot_take_is_refused_with_the_projects_error(module, kernel_name):
    kernel = getattr(module, kernel_name)
    specs, constexprs = module.EXAMPLE_ARGS[kernel_name]
    for name in _constexprs(kernel):
        for value in BAD_VALUES:
            try:
                kernel.compile(*specs, **{**constexprs, name: value})
            except ad.AsyncDSLError as error:
                assert error.location is not None, f"{kernel_name}({name}={value!r}): {error} names no line"
