"""The kernels of the examples and of the library, each with the arguments `asyncdsl dump` takes
(a module's `EXAMPLE_ARGS`), as pytest parameters: for tests that hold every kernel the project
builds to a rule."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import asyncdsl.examples
import asyncdsl.kernels


def example_kernels():
    """The examples' and the library's kernels, with the arguments `asyncdsl dump` takes."""
    for package in (asyncdsl.examples, asyncdsl.kernels):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, (args, kwargs) in getattr(module, "EXAMPLE_ARGS", {}).items():
                yield pytest.param(getattr(module, name), args, kwargs, id=f"{info.name}:{name}")
