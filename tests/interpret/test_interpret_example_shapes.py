"""The examples refuse, when traced, arguments whose shapes do not fit their input's: an output
of another shape would be written only as far as it reaches and the rest left as it was, a
smaller second input read as zeros.  The error names the example's line that checks and the
rule broken."""

from __future__ import annotations

import importlib

import pytest

import asyncdsl as ad

S = ad.ArraySpec
F32 = ad.float32

CASES = [  # (module, kernel, arguments, constexprs, message)
    ("tile_copy", "tile_copy", (S((1000, 528), F32), S((500, 528), F32)), {"BM": 64, "BN": 64},
     r"dst must have shape \(1000, 528\) \(a copy of src\)"),
    ("pipelined_copy", "pipelined_copy", (S((1000, 528), F32), S((1000, 520), F32)),
     {"BM": 64, "BN": 64, "STAGES": 3, "CTAS": 7}, r"dst must have shape \(1000, 528\)"),
]


@pytest.mark.parametrize("module,kernel,arguments,constexprs,message", CASES,
                         ids=[f"{case[1]}-{i}" for i, case in enumerate(CASES)])
def test_arguments_that_do_not_fit_the_input_are_refused_at_the_examples_line(module, kernel, arguments,
                                                                              constexprs, message):
    example = importlib.import_module(f"asyncdsl.examples.{module}")
    with pytest.raises(ad.TraceError, match=message) as caught:
        getattr(example, kernel).compile(*arguments, **constexprs)
    assert caught.value.location.file == example.__file__
