"""Bad kernels and bad calls fail with the project's errors, naming the rule and the user's line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from support import expect, line_of

import asyncdsl as ad

F32 = ad.float32


def load_tile(rows: int, cols: int, smem_shape=None, smem_dtype=None, **copy_kwargs):
    @ad.kernel(grid=(1, 1))
    def kernel(x):
        buf = ad.smem(smem_shape or (rows, cols), smem_dtype or x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(0, rows), ad.ds(0, cols)], buf, barrier=bar, **copy_kwargs)  # the copy
        bar.wait()

    return kernel


def test_box_dimension_over_256():
    kernel = load_tile(300, 16)
    error = expect(ad.CopyError, kernel, (ad.ArraySpec((512, 64), F32),), {}, "300", "256",
                   line_text="the copy")
    assert "dim 0" in str(error)


def test_shared_memory_overflow_lists_every_allocation():
    @ad.kernel
    def kernel(x):
        a = ad.smem((128, 256), F32)  # first
        b = ad.smem((128, 256), F32)  # second
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(0, 128), ad.ds(0, 256)], a, barrier=bar)
        ad.async_copy(x.at[ad.ds(0, 128), ad.ds(0, 256)], b, barrier=bar)

    spec = ad.ArraySpec((128, 256), F32)
    with pytest.raises(ad.ResourceError) as caught:
        kernel.compile(spec)
    message = str(caught.value)
    assert "262152 bytes" in message and "231424" in message
    assert f"test_error_messages.py:{line_of(kernel.fn, '# first')}" in message
    assert f"test_error_messages.py:{line_of(kernel.fn, '# second')}" in message
    # The error points at the allocation that no longer fits.
    assert caught.value.location.line == line_of(kernel.fn, "# second")


def test_gmem_stride_not_multiple_of_16_bytes():
    kernel = load_tile(8, 4)
    expect(ad.CopyError, kernel, (ad.ArraySpec((64, 3 * 4 + 1), F32),), {}, "stride", "multiple of 16")


def test_minor_dimension_bytes_not_multiple_of_16():
    kernel = load_tile(8, 3)
    expect(ad.CopyError, kernel, (ad.ArraySpec((64, 64), F32),), {}, "12 bytes", "multiple of 16",
           line_text="the copy")


def test_element_type_mismatch():
    kernel = load_tile(8, 8, smem_dtype=ad.bfloat16)
    expect(ad.TraceError, kernel, (ad.ArraySpec((64, 64), F32),), {}, "same element type", "f32", "bf16",
           line_text="the copy")


def test_smem_shape_mismatch():
    kernel = load_tile(8, 8, smem_shape=(8, 16))
    expect(ad.CopyError, kernel, (ad.ArraySpec((64, 64), F32),), {}, "(8, 16)", "(8, 8)",
           line_text="the copy")


def test_swizzle_needs_the_minor_dim_to_be_the_swizzle_width():
    kernel = load_tile(8, 16, swizzle=128)
    expect(ad.CopyError, kernel, (ad.ArraySpec((64, 64), F32),), {}, "swizzle 128", "64 bytes",
           line_text="the copy")


def test_load_without_barrier():
    @ad.kernel
    def kernel(x):
        buf = ad.smem((8, 8), x.dtype)
        ad.async_copy(x.at[ad.ds(0, 8), ad.ds(0, 8)], buf)  # no barrier

    expect(ad.TraceError, kernel, (ad.ArraySpec((64, 64), F32),), {}, "needs a barrier",
           line_text="no barrier")


def test_store_with_barrier():
    @ad.kernel
    def kernel(x):
        buf = ad.smem((8, 8), x.dtype)
        bar = ad.barrier()
        ad.async_copy(buf, x.at[ad.ds(0, 8), ad.ds(0, 8)], barrier=bar)  # store

    expect(ad.TraceError, kernel, (ad.ArraySpec((64, 64), F32),), {}, "take no barrier", line_text="# store")


def test_wrong_argument_count_names_the_call_site():
    kernel = load_tile(8, 8)
    with pytest.raises(ad.ArgumentError) as caught:
        kernel.compile(np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32))  # two arrays
    assert "too many positional arguments" in str(caught.value)
    assert caught.value.location.line == inspect.currentframe().f_lineno - 2


def test_missing_constexpr():
    @ad.kernel
    def kernel(x, B: ad.constexpr):
        ad.smem((B, B), x.dtype)

    with pytest.raises(ad.ArgumentError, match="missing a required argument: 'B'"):
        kernel.compile(ad.ArraySpec((8, 8), F32))


def test_traced_value_used_as_python_int():
    @ad.kernel
    def kernel(x):
        n = ad.program_id(0)
        ad.smem((n, 8), x.dtype)  # traced shape

    expect(ad.TraceError, kernel, (ad.ArraySpec((8, 8), F32),), {}, "positive ints",
           line_text="traced shape")


def test_traced_condition_in_python_if():
    @ad.kernel
    def kernel(x):
        if ad.program_id(0) == 0:  # python if
            pass

    expect(ad.TraceError, kernel, (ad.ArraySpec((8, 8), F32),), {}, "asyncdsl.when", line_text="python if")


def test_allocation_inside_a_loop():
    @ad.kernel
    def kernel(x):
        for _ in ad.range(4):
            ad.smem((8, 8), x.dtype)  # in loop

    expect(ad.TraceError, kernel, (ad.ArraySpec((8, 8), F32),), {}, "top level", line_text="in loop")


def test_break_out_of_a_traced_loop():
    @ad.kernel
    def kernel(x):
        for _ in ad.range(4):  # the loop
            break

    expect(ad.TraceError, kernel, (ad.ArraySpec((8, 8), F32),), {}, "early", line_text="the loop")


def test_ops_outside_a_kernel():
    with pytest.raises(ad.TraceError, match="inside a function decorated with @asyncdsl.kernel"):
        ad.program_id(0)


def test_unsupported_dtype():
    kernel = load_tile(8, 8)
    with pytest.raises(ad.ArgumentError, match="complex64"):
        kernel.compile(np.zeros((8, 8), np.complex64))


def test_barrier_index_out_of_range():
    @ad.kernel
    def kernel(x):
        bars = ad.barrier(num=2)
        bars[2].wait()  # out of range

    expect(ad.TraceError, kernel, (ad.ArraySpec((8, 8), F32),), {}, "out of range", line_text="out of range")


def test_indexing_more_dims_than_the_array_has():
    @ad.kernel
    def kernel(x):
        buf = ad.smem((8, 8), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[0, 0, 0], buf, barrier=bar)  # too many

    expect(ad.TraceError, kernel, (ad.ArraySpec((8, 8), F32),), {}, "3 indices", line_text="too many")


def test_block_must_be_whole_warpgroups():
    with pytest.raises(ad.ArgumentError, match="whole warpgroups"):
        ad.kernel(block=96)(lambda x: None)


@ad.kernel(grid=(1,))
def _refuses_its_constexpr(x, N: ad.constexpr):
    if N > 4:
        raise ad.TraceError(f"N={N} is too large for this kernel")  # the refusal


def test_an_error_kernel_code_raises_itself_carries_its_line():
    with pytest.raises(ad.TraceError, match="N=8 is too large") as caught:
        _refuses_its_constexpr.compile(ad.ArraySpec((8,), ad.float32), N=8)
    assert caught.value.location.line == line_of(_refuses_its_constexpr.fn, "the refusal")


@ad.kernel(grid=(1,))
def _divides_by_its_constexpr(x, CHUNK: ad.constexpr):
    pieces = x.shape[0] // CHUNK  # the division
    del pieces


def test_a_python_error_of_kernel_code_is_a_trace_error_at_its_line_with_the_original_chained():
    with pytest.raises(ad.TraceError,
                       match="ZeroDivisionError while tracing kernel _divides_by_its_constexpr: "
                             "integer division or modulo by zero") as caught:
        _divides_by_its_constexpr.compile(ad.ArraySpec((8,), ad.float32), CHUNK=0)
    assert caught.value.location.line == line_of(_divides_by_its_constexpr.fn, "the division")
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


def test_an_array_spec_takes_numpy_ints_and_dtype_names_and_refuses_the_rest_at_its_line():
    # Its fields went unchecked: a str dtype, an int shape or a float dim failed as internal
    # errors (AttributeError, TypeError, xDSL's VerifyException) when a kernel was traced.
    spec = ad.ArraySpec([np.int64(64), 128], "float32")
    assert spec == ad.ArraySpec((64, 128), F32) and hash(spec) == hash(ad.ArraySpec((64, 128), np.float32))
    for shape, dtype, fragment in [((64, 128), "float33", "unknown dtype 'float33'"), (64, F32, "got 64"),
                                   ((64.0, 128), F32, "got (64.0, 128)"), ((64, -1), F32, "got (64, -1)"),
                                   ((64, True), F32, "got (64, True)"), ((64, 128), None, "no element type")]:
        with pytest.raises(ad.ArgumentError) as caught:
            ad.ArraySpec(shape, dtype)  # the spec
        assert fragment in caught.value.message, caught.value.message
        test = test_an_array_spec_takes_numpy_ints_and_dtype_names_and_refuses_the_rest_at_its_line
        assert caught.value.location.line == line_of(test, "# the spec")


@pytest.mark.parametrize("vec", [0, -4, 4.0, True])
def test_a_strided_layout_of_no_positive_int_is_refused_at_the_users_line(vec):
    # It was refused with no location at all (by the layout's generated constructor).
    with pytest.raises(ad.LayoutError, match="positive int vector length") as caught:
        ad.strided(vec)  # the layout
    assert caught.value.location.line == line_of(
        test_a_strided_layout_of_no_positive_int_is_refused_at_the_users_line, "# the layout")
