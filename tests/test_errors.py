"""The error classes (`asyncdsl/errors.py`): one base, `AsyncDSLError`, that is no `ValueError`;
subclasses that say what went wrong, grouped where callers catch a group; a docstring on each
that says when it is raised (the reference is made from them); `at` keeps the class and its data."""

from __future__ import annotations

import importlib.util
import inspect

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl import errors, kernels
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


def _module_at(path, name: str, source: str):
    """The module `name` run from the file `path` (not entered in sys.modules): a frame of its
    functions has that file and that module, as a frame of an installed package does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torch_at(root):
    """torch's path from an operator call to the library function it dispatches to, as modules
    of a `torch` package under `root` (anywhere, not only in site-packages): autograd's `apply`
    calling the custom op, the custom op calling the function registered for it."""
    custom_ops = _module_at(root / "torch" / "_library" / "custom_ops.py", "torch._library.custom_ops",
                            "def dispatch(fn, *args, **kwargs):\n    return fn(*args, **kwargs)\n")
    function = _module_at(root / "torch" / "autograd" / "function.py", "torch.autograd.function",
                          "def apply(op, fn, *args, **kwargs):\n    return op(fn, *args, **kwargs)\n")
    return function.apply, custom_ops.dispatch


def test_an_argument_error_through_torchs_frames_names_the_callers_line(tmp_path):
    # An `asyncdsl.ops` operator reaches the library through torch's autograd and dispatcher,
    # wherever torch is installed: the line a refusal names is the caller's, not torch's.
    apply, dispatch = _torch_at(tmp_path / "src")
    q = np.zeros((1, 128, 64), ml_dtypes.bfloat16)
    with pytest.raises(ad.ArgumentError, match="attention takes 4-dim q, k, v") as caught:
        apply(dispatch, kernels.attention, q, q, q)
    assert caught.value.location == SourceLocation(__file__, caught.tb.tb_lineno)


def test_torchs_generated_graphs_are_not_the_users_line(tmp_path):
    # torch.compile's graphs run as code torch generated: an fx graph ("<eval_with_key>.N") and
    # inductor's output module (a submodule of torch's code cache, in a temporary folder).
    fx_graph: dict = {}
    exec(compile("def forward(fn):\n    return fn()\n", "<eval_with_key>.3", "exec"), fx_graph)
    inductor = _module_at(tmp_path / "torchinductor" / "c3" / "cabc.py", "torch._inductor.codecache.cabc",
                          "def call(graph, fn):\n    return graph(fn)\n")
    location, line = inductor.call(fx_graph["forward"], errors.user_location), inspect.currentframe().f_lineno
    assert location == SourceLocation(__file__, line)


def test_a_users_folder_named_torch_holds_user_lines(tmp_path):
    # What makes a frame torch's is its module, not a folder's name on the user's disk.
    script = _module_at(tmp_path / "torch" / "train.py", "train",
                        "def step(locate):\n    return locate()\n")
    location = script.step(errors.user_location)
    assert location == SourceLocation(str(tmp_path / "torch" / "train.py"), 2)
