"""Binding a call to a kernel's parameters (`jit/binding.py`): which are constexprs, runtime
scalars and arrays, what a call gave each, and the errors of a call that does not fit."""

from __future__ import annotations

import importlib
import pkgutil
import re

import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl import kernels
from asyncdsl.errors import SourceLocation
from asyncdsl.examples.tile_copy import tile_copy
from asyncdsl.jit.kernel import Kernel
from asyncdsl.jit.specs import ScalarSpec

X = ad.ArraySpec((64, 64), ad.float32)


def scaled(x, n: int, s, B: ad.constexpr = 4):
    pass


def test_annotations_and_values_say_what_each_parameter_is():
    signature = ad.kernel(scaled).signature
    assert signature.constexpr_names == ("B",) and signature.runtime_names == ("x", "n", "s")
    assert signature.scalar_kinds == {"n": "int"} and signature.defaults == {"B": 4}
    call = signature.bind((X, 32, 0.5), {}, None)
    assert call.kinds == (None, "int", "float") and call.constexprs == {"B": 4}
    assert call.specs(None) == (X, ScalarSpec("int", 16), ScalarSpec("float"))
    assert call.arrays() == [("x", X)] and call.scalars() == [32, 0.5]


def test_numpy_constexprs_mean_their_python_values():
    signature = ad.kernel(scaled).signature
    for value, python in ((np.int64(8), 8), (np.float32(0.5), 0.5), (np.bool_(True), True)):
        (bound,) = signature.bind((X, 1, 1.0), {"B": value}, None).constexprs.values()
        assert bound == python and type(bound) is type(python)


def test_constexpr_by_position_and_by_name_share_a_specialisation():
    assert tile_copy.compile(X, X, 64, BN=64) is tile_copy.compile(X, X, BM=64, BN=64)


def test_a_call_that_does_not_fit_the_signature_names_the_parameters():
    with pytest.raises(ad.ArgumentError, match=r"scaled\(x, n, s, B\): missing a required argument: 's'"):
        ad.kernel(scaled).signature.bind((X, 1), {}, None)
    with pytest.raises(ad.ArgumentError, match="constexpr B must be hashable, got list"):
        ad.kernel(scaled).signature.bind((X, 1, 1.0), {"B": [4]}, None)


def test_a_kernel_taking_star_args_is_refused_at_its_definition():
    def spread(x, *rest):
        pass

    with pytest.raises(ad.TraceError, match="kernel spread cannot take \\*args or \\*\\*kwargs") as caught:
        ad.kernel(spread)
    assert caught.value.location.line == spread.__code__.co_firstlineno


def masked(x, CAUSAL: ad.constexpr = False, TURNS: ad.constexpr = True, N: ad.constexpr = 0):
    pass


@pytest.mark.parametrize("value", [False, True, 0, 1, np.bool_(True), np.int32(1)])
def test_a_flag_takes_a_truth_value(value):
    # A constexpr whose default is True or False is a flag; an int default leaves N a number.
    signature = ad.kernel(masked).signature
    call = signature.bind((X,), {"CAUSAL": value, "N": 7}, None)
    assert signature.flags == ("CAUSAL", "TURNS")
    assert call.constexprs == {"CAUSAL": value, "TURNS": True, "N": 7}


@pytest.mark.parametrize("value", [2, -1, "no", None, 1.0, (1,)])
def test_a_flag_refuses_any_other_value_at_the_callers_line(value):
    rule = (r"masked's constexpr TURNS is a flag \(its default is True\): it takes True or False "
            rf"\(or 1 or 0\), got {re.escape(repr(value))}")
    with pytest.raises(ad.ArgumentError, match=rule) as caught:
        ad.kernel(masked).compile(X, TURNS=value)
    assert caught.value.location == SourceLocation(__file__, caught.tb.tb_lineno)


def square_root(x, y, APPROX: ad.constexpr = False):
    ad.store(y.at[:, :], ad.sqrt(ad.load(x.at[:, :]), approx=APPROX))


def test_a_flag_given_as_1_or_0_is_a_bool_to_the_options_it_is_passed_on_to(compilations):
    kernel = ad.kernel(grid=(1,))(square_root)
    x = np.linspace(0, 4, 64 * 64, dtype=np.float32).reshape(64, 64)
    approximate, exact = "sqrt.approx.ftz.f32", "sqrt.rn.f32"
    for approx, instruction in ((1, approximate), (True, approximate), (0, exact)):
        assert instruction in kernel.ptx(X, X, APPROX=approx)
        y = np.zeros_like(x)
        kernel.interpret(x, y, APPROX=approx)
        assert np.allclose(y, np.sqrt(x), rtol=1e-6)
    assert compilations[0] == 2  # 1 and True are one specialisation


def _library_flags():
    """Each flag of each kernel of the library (CAUSAL, TURNS, DETERMINISTIC, ...)."""
    for module in pkgutil.iter_modules(kernels.__path__):
        for kernel in vars(importlib.import_module(f"asyncdsl.kernels.{module.name}")).values():
            if isinstance(kernel, Kernel):
                yield from ((kernel, flag) for flag in kernel.signature.flags)


LIBRARY_FLAGS = sorted(set(_library_flags()), key=lambda pair: (pair[0].__name__, pair[1]))


def test_the_library_kernels_declare_their_switches_as_flags():
    names = {f"{kernel.__name__}.{flag}" for kernel, flag in LIBRARY_FLAGS}
    assert {"attention_kernel.CAUSAL", "attention_kernel.TURNS"} <= names
    assert {flag for kernel, flag in LIBRARY_FLAGS} >= {"CAUSAL", "DETERMINISTIC", "TURNS"}


@pytest.mark.parametrize("kernel,flag", LIBRARY_FLAGS, ids=[f"{k.__name__}-{f}" for k, f in LIBRARY_FLAGS])
def test_a_library_kernel_refuses_a_flag_that_is_no_truth_value(kernel, flag):
    arguments = [X] * len(kernel.runtime_names)
    constexprs = {name: 1 for name in kernel.constexpr_names if name not in kernel.signature.defaults}
    with pytest.raises(ad.ArgumentError, match=f"{kernel.__name__}'s constexpr {flag} is a flag") as caught:
        kernel.compile(*arguments, **{**constexprs, flag: 2})
    assert caught.value.location == SourceLocation(__file__, caught.tb.tb_lineno)
