"""Binding a call to a kernel's parameters (`jit/binding.py`): which are constexprs, runtime
scalars and arrays, what a call gave each, and the errors of a call that does not fit."""

from __future__ import annotations

import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl.examples.tile_copy import tile_copy
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
