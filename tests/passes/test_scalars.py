"""Runtime scalars through the passes: the kernel parameters they become (`.s32`, `.f32`, after
the arrays' pointers, before the descriptors), their loads in the prologue, float32 scalar
comparisons, constants and conversions, what the divisibility analysis reads of an int argument,
and PTX that ptxas assembles (with tiles, the descriptor scratch and debug-mode checks too)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scalar_kernels import scale_tile
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.kernel_binary import ErrorBufferParam, PointerParam, ScalarParam, TensorMapParam
from asyncdsl.passes.pipeline import make_context
from asyncdsl.passes.resolve.index_facts import known_divisor, known_non_negative

F32 = ad.ArraySpec((256, 64), ad.float32)
B = 16


def copy_rows_body(x, y, row0: int, count, scale: float):
    """Copy `count` tiles of B rows from row `row0` on, if `scale` is positive."""
    buf = ad.smem((B, x.shape[1]), x.dtype)
    bar = ad.barrier()
    for i in ad.range(count):
        with ad.when(scale > 0.0):
            rows = ad.ds(row0 + i * B, B)
            ad.async_copy(x.at[rows, :], buf, barrier=bar)
            bar.wait()
            ad.async_copy(buf, y.at[rows, :])
            ad.await_async_copy(0)


copy_rows = ad.kernel(grid=(1,), name="copy_rows")(copy_rows_body)


def _param_lines(ptx: str) -> list[str]:
    return re.findall(r"^\s+\.param (.*?),?$", ptx, re.MULTILINE)


def test_scalars_are_parameters_between_the_pointers_and_the_descriptors(ptxas):
    compiled = copy_rows.compile(F32, F32, 32, 3, 0.5)
    assert compiled.binary.params[:5] == (
        PointerParam(0), PointerParam(1), ScalarParam(0, "int", "row0"), ScalarParam(1, "int", "count"),
        ScalarParam(2, "float", "scale"),
    )
    assert all(isinstance(p, TensorMapParam) for p in compiled.binary.params[5:])
    assert compiled.binary.arg_names == ("x", "y")  # the arrays a launch takes
    assert _param_lines(compiled.ptx)[:5] == [
        ".u64 copy_rows_param_0", ".u64 copy_rows_param_1", ".s32 copy_rows_param_2",
        ".s32 copy_rows_param_3", ".f32 copy_rows_param_4",
    ]
    for load in ("ld.param.s32 %r1, [copy_rows_param_2];", "ld.param.s32 %r2, [copy_rows_param_3];",
                 "ld.param.f32 %f1, [copy_rows_param_4];"):
        assert load in compiled.ptx
    assert "setp.gt.f32" in compiled.ptx
    ptxas(compiled.ptx)


def test_the_descriptor_scratch_and_the_error_buffer_follow_the_scalars(monkeypatch, ptxas):
    scratch = ad.kernel(grid=(1,), descriptors="scratch")(copy_rows_body)
    params = scratch.compile(F32, F32, 8, 3, 0.5).binary.params
    assert [type(p).__name__ for p in params] == [
        "PointerParam", "PointerParam", "ScalarParam", "ScalarParam", "ScalarParam", "DescriptorScratchParam",
    ]
    ptxas(scratch.ptx(F32, F32, 8, 3, 0.5))
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    debug = ad.kernel(grid=(1,))(copy_rows_body)
    compiled = debug.compile(F32, F32, 8, 3, 0.5)  # row0 unproven: its alignment is checked
    assert isinstance(compiled.binary.params[-1], ErrorBufferParam)
    ptxas(compiled.ptx)


def test_float_scalar_arithmetic_constants_and_comparisons(ptxas):
    @ad.kernel(grid=(1,))
    def arithmetic(x, s: float, n: int):
        buf = ad.smem((16,), x.dtype)
        bar = ad.barrier()
        with ad.when(((s * 0.1 + n) / 3.0 - s < 2.0) & (-s != 1.0) & (n / 2 >= s)):
            ad.async_copy(x.at[ad.ds(0, 16)], buf, barrier=bar)
            bar.wait()

    ptx = arithmetic.ptx(ad.ArraySpec((64,), ad.float32), 0.5, 3)
    assert "mov.f32 %f2, 0f3DCCCCCD;" in ptx  # 0.1 as float32, exactly
    for instruction in ("mul.rn.f32", "add.rn.f32", "div.rn.f32", "sub.rn.f32", "cvt.rn.f32.s32",
                        "setp.lt.f32", "setp.neu.f32", "setp.ge.f32"):
        assert instruction in ptx, instruction
    ptxas(ptx)


def test_scalars_meet_register_tiles_in_ptx(ptxas):
    spec = ad.ArraySpec((64, 64), ad.float32)
    ptx = scale_tile.ptx(spec, spec, 0.5, 3)
    assert "setp.gt.f32" in ptx and "ld.param.f32 %f1" in ptx
    ptxas(ptx)


def test_the_divisibility_analysis_reads_the_specialization():
    traced = copy_rows.compile(F32, F32, 48, 3, 0.5).traced
    (fn,) = attrs.kernels(Parser(make_context(), traced).parse_module())
    row0, count = fn.args[2], fn.args[3]
    assert attrs.arg_divisor(fn, 2) == 16 and known_divisor(row0) == 16
    assert known_divisor(count) == 1 and not known_non_negative(row0)
    products = [op.result for op in fn.walk() if op.name == "arith.muli"]
    assert products and known_divisor(products[0]) == 16  # i * 16
    odd = copy_rows.compile(F32, F32, 40, 3, 0.5).traced
    (fn,) = attrs.kernels(Parser(make_context(), odd).parse_module())
    assert known_divisor(fn.args[2]) == 1


@pytest.mark.parametrize("start, proven", [(64, True), (4, False)])
def test_a_bulk_copy_needs_no_check_of_a_start_known_to_be_a_multiple_of_16(start, proven):
    @ad.kernel(grid=(1,))
    def bulk(x, start: int):
        buf = ad.smem((64,), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(start, 64)], buf, barrier=bar, oob="undefined")  # a bulk copy
        bar.wait()

    resolved = bulk.stages(ad.ArraySpec((1024,), ad.float32), start)["resolve-transforms"]
    assert '"asyncdsl.bulk_load"' in resolved
    assert ("16-byte aligned" in resolved) is not proven


@ad.kernel(grid=(1,))
def _twice_negated_start(x, y, n: int, FORM: ad.constexpr):
    start = {"neg": lambda: -(-n), "zero_minus": lambda: 0 - (0 - n),
             "times_minus_one": lambda: (n * -1) * -1}[FORM]()
    ad.store(y.at[ad.ds(start, B), :], ad.load(x.at[ad.ds(start, B), :]))


@pytest.mark.parametrize("form", ["neg", "zero_minus", "times_minus_one"])
def test_a_negated_index_is_not_then_add_one(ptxas, form):
    # As for tiles (docs/hardware.md §20): ptxas loses a negation it folds into a three-input
    # min/max, and index arithmetic clamps with min and max.
    x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    y = np.zeros_like(x)
    ptx = _twice_negated_start.ptx(F32, F32, int, FORM=form)
    assert ptx.count("not.b32") == 2  # both negations
    ptxas(ptx)
    _twice_negated_start.interpret(x, y, 48, FORM=form)
    assert np.array_equal(y[48:48 + B], x[48:48 + B]) and not y[:48].any() and not y[48 + B:].any()
