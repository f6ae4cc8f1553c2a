"""The examples refuse, when traced, arguments whose shapes do not fit their input's: an output
of another shape would be written only as far as it reaches and the rest left as it was, a
smaller second input read as zeros.  The error names the example's line that checks and the
rule broken."""

from __future__ import annotations

import importlib

import pytest

import asyncdsl as ad

S = ad.ArraySpec
BF, F32, F8 = ad.bfloat16, ad.float32, ad.float8_e4m3fn

CASES = [  # (module, kernel, arguments, constexprs, message)
    ("softmax", "softmax_rows", (S((64, 1024), BF), S((32, 1024), BF)), {"ROWS": 2, "CHUNK": 1024},
     r"y must have shape \(64, 1024\) \(one element for each of x's\), got \(32, 1024\)"),
    ("softmax", "softmax_halves", (S((5, 8192), BF), S((5, 4096), BF)), {}, r"y must have shape \(5, 8192\)"),
    ("softmax", "softmax_padded", (S((5, 1000), BF), S((5, 900), BF)), {"ROWS": 2, "WIDTH": 1024},
     r"y must have shape \(5, 1000\)"),
    ("rms_norm", "rms_norm_rows", (S((64, 1024), BF), S((512,), BF), S((64, 1024), BF)),
     {"EPS": 1e-6, "ROWS": 8, "CHUNK": 1024}, r"w must have shape \(1024,\) \(one weight a column of x\)"),
    ("rms_norm", "rms_norm_padded", (S((9, 1000), BF), S((1000,), BF), S((8, 1000), BF)),
     {"EPS": 1e-6, "ROWS": 8, "WIDTH": 1024}, r"y must have shape \(9, 1000\)"),
    ("layer_norm", "layer_norm_rows", (S((64, 1024), BF), S((1024,), BF), S((512,), BF), S((64, 1024), BF)),
     {"EPS": 1e-5, "ROWS": 8, "CHUNK": 1024}, r"b must have shape \(1024,\) \(one bias a column of x\)"),
    ("layer_norm", "layer_norm_padded", (S((9, 1000), BF), S((1000,), BF), S((1000,), BF), S((9, 900), BF)),
     {"EPS": 1e-5, "ROWS": 8, "WIDTH": 1024}, r"y must have shape \(9, 1000\)"),
    ("swiglu", "swiglu", (S((96, 3000), BF), S((48, 3000), BF), S((96, 3000), BF)), {"CHUNK": 1024},
     r"b must have shape \(96, 3000\) \(silu\(a\) \* b takes them element by element\)"),
    ("swiglu", "swiglu", (S((96, 3000), BF), S((96, 3000), BF), S((96, 2000), BF)), {"CHUNK": 1024},
     r"y must have shape \(96, 3000\) \(one element for each of a's\)"),
    ("rowwise_fp8_quant", "rowwise_fp8_quant", (S((64, 3000), BF), S((64, 2000), F8), S((64,), F32)),
     {"CHUNK": 1024}, r"q must have shape \(64, 3000\)"),
    ("rowwise_fp8_quant", "rowwise_fp8_quant_split", (S((5, 4096), BF), S((5, 4096), F8), S((4,), F32)), {},
     r"scales must have shape \(5,\) \(one a row of x\)"),
    ("rowwise_fp8_quant", "rowwise_fp8_quant_ring", (S((5, 2048), BF), S((5, 2048), F8), S((5,), BF)),
     {"STAGES": 2}, "scales must be float32, got bfloat16"),
    ("permute_bhsd", "permute_bhsd", (S((2, 16, 1000, 64), BF), S((2, 16, 1000, 64), BF)), {"BS": 32},
     r"y must have shape \(2, 1000, 16, 64\) \(x's \(B, H, S, D\) as \(B, S, H, D\)\)"),
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
