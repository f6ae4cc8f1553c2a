"""The error classes (`asyncdsl/errors.py`): one base, `AsyncDSLError`, that is no `ValueError`;
subclasses that say what went wrong, grouped where callers catch a group; a docstring on each
that says when it is raised (the reference is made from them); `at` keeps the class and its data."""

from __future__ import annotations

import inspect

import pytest

import asyncdsl as ad
from asyncdsl import errors
from asyncdsl.errors import AsyncDSLError, CudaError, InterpretError, SourceLocation

CLASSES = [value for value in vars(errors).values()
           if inspect.isclass(value) and issubclass(value, (AsyncDSLError, Warning))
           and value.__module__ == errors.__name__]


def test_every_error_is_an_asyncdsl_error_and_none_a_value_error():
    assert AsyncDSLError.__bases__ == (Exception,)
    for error in CLASSES:
        assert not issubclass(error, (ValueError, TypeError)), error
    warnings = [error.__name__ for error in CLASSES if not issubclass(error, AsyncDSLError)]
    assert warnings == ["PerformanceWarning"]


def test_the_interpreters_findings_are_caught_together():
    kinds = {error.__name__ for error in CLASSES
             if issubclass(error, InterpretError) and error is not InterpretError}
    assert kinds == {"DeadlockError", "RaceError", "BarrierError", "OutOfBoundsError"}


@pytest.mark.parametrize("error", CLASSES, ids=lambda error: error.__name__)
def test_each_class_says_when_it_is_raised(error):
    doc = inspect.getdoc(error) or ""
    assert doc.startswith(("Raised ", "Warned ", "The base class")) and len(doc) > 60, (error, doc)


@pytest.mark.parametrize("name", [name for name in ad.__all__ if name.endswith(("Error", "Warning"))])
def test_the_public_errors_are_those_of_errors_py(name):
    assert getattr(ad, name) is getattr(errors, name)


def test_at_names_a_line_once_and_keeps_the_class_and_its_data():
    here, there = SourceLocation("kernel.py", 3), SourceLocation("kernel.py", 9)
    deadlock = errors.DeadlockError("every warpgroup waits").at(here)
    assert type(deadlock) is errors.DeadlockError and str(deadlock) == "kernel.py:3: every warpgroup waits"
    assert deadlock.at(there) is deadlock
    failed = CudaError("cuLaunchKernelEx failed", code=700).at(here)
    assert failed.code == 700 and failed.location == here


def test_torchs_frames_between_an_operator_call_and_the_library_are_skipped():
    # An `asyncdsl.ops` operator reaches the library through torch's dispatcher: the line a
    # refusal names is the caller's, not a frame of torch's custom_ops.py.
    dispatcher = {"user_location": errors.user_location}
    exec(compile("def dispatch():\n    return user_location(1)\n",
                 "/env/lib/python3.12/site-packages/torch/_library/custom_ops.py", "exec"), dispatcher)
    location = dispatcher["dispatch"]()
    assert location is not None and location.file == __file__
