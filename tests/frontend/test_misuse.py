"""API entry points given the wrong kind of value answer with the project's own error, at the
caller's line, saying the rule: each case below once escaped as an internal exception
(AttributeError, TypeError, ZeroDivisionError, OverflowError) or named no line of the user's."""

from __future__ import annotations

import numpy as np
import pytest
from support import line_of

import asyncdsl as ad
from asyncdsl.kernels.attention import attention_kernel

F32 = ad.ArraySpec((64, 128), ad.float32)


def program_id_of_a_float(x, y):
    ad.program_id(0.0)  # the misuse


def await_half_a_group(x, y):
    ad.await_async_copy(0.5)  # the misuse


def relayout_to_none(x, y):
    ad.load(x.at[...]).to_layout(None)  # the misuse


def sum_over_a_float_axis(x, y):
    ad.load(x.at[...]).sum(axis=1.0)  # the misuse


def zeros_of_no_shape(x, y):
    ad.zeros(None, ad.float32)  # the misuse


def cdiv_by_zero(x, y):
    ad.cdiv(4, 0)  # the misuse


def ring_step_of_a_str(x, y):
    ring = ad.Pipeline(2)
    ring.produce("a")  # the misuse


def tile_indexed_by_a_tile(x, y):
    tile = ad.load(x.at[...])
    tile[tile]  # the misuse


@pytest.mark.parametrize("body, fragment", [
    (program_id_of_a_float, "axis must be 0, 1 or 2, got 0.0"),
    (await_half_a_group,
     "allow_groups (how many copy groups may stay pending) must be a Python int, got 0.5"),
    (relayout_to_none, "to_layout: say which layout"),
    (sum_over_a_float_axis, "axis must be an int, a tuple of ints or None, got 1.0"),
    (zeros_of_no_shape, "needs a shape of positive ints, got None"),
    (cdiv_by_zero, "asyncdsl.cdiv(4, 0): division by zero"),
    (ring_step_of_a_str, "a step is a Python int or a traced index, got 'a'"),
    (tile_indexed_by_a_tile, "they do not slice"),
])
def test_a_kernel_body_misusing_an_entry_point_gets_a_trace_error_at_its_line(body, fragment):
    kernel = ad.kernel(grid=(1,))(body)
    with pytest.raises(ad.TraceError) as caught:
        kernel.compile(F32, F32)
    assert fragment in caught.value.message, caught.value.message
    assert caught.value.location.line == line_of(body, "# the misuse")


def test_a_reduction_axis_may_be_a_numpy_int():
    def body(x, y):
        ad.store(y.at[ad.ds(0, 1), :], ad.load(x.at[...]).sum(axis=np.int64(0))[None, :])

    x, y = np.arange(64 * 128, dtype=np.float32).reshape(64, 128), np.zeros((64, 128), np.float32)
    ad.kernel(grid=(1,))(body).interpret(x, y)
    assert np.array_equal(y[0], x.sum(axis=0))


def test_the_kernel_decorator_refuses_a_class_or_a_name_that_is_no_str():
    class NotAFunction:
        pass

    with pytest.raises(ad.ArgumentError, match="decorates a Python function") as caught:
        ad.kernel(grid=(1,))(NotAFunction)  # the class
    assert caught.value.location.line == line_of(
        test_the_kernel_decorator_refuses_a_class_or_a_name_that_is_no_str, "# the class")
    with pytest.raises(ad.ArgumentError, match="name must be a str"):
        ad.kernel(grid=(1,), name=3)(program_id_of_a_float)


def test_a_float_argument_past_every_float_is_an_argument_error():
    @ad.kernel(grid=(1,))
    def scaled(y, s: float):
        ad.store(y.at[...], ad.full(y.shape, s, ad.float32))

    with pytest.raises(ad.ArgumentError, match="an int of 1329 bits, beyond the float32 range"):
        scaled.interpret(np.zeros((64, 128), np.float32), 10 ** 400)


@pytest.mark.parametrize("key, fragment", [(lambda *a, **k: [1], "TypeError: unhashable type: 'list'"),
                                           (lambda *a, **k: 1 / 0, "ZeroDivisionError")])
def test_an_autotune_key_function_that_fails_is_an_argument_error_at_the_call(key, fragment):
    @ad.kernel(grid=(1,))
    def fill(y):
        ad.store(y.at[...], ad.zeros(y.shape, ad.float32))

    tuned = ad.autotune([ad.Choice(fill)], key=key)
    with pytest.raises(ad.ArgumentError) as caught:
        tuned.chosen(np.zeros((64, 128), np.float32))  # the call
    assert ("the key function must return a hashable value" in caught.value.message
            and fragment in caught.value.message)
    test = test_an_autotune_key_function_that_fails_is_an_argument_error_at_the_call
    assert caught.value.location.line == line_of(test, "# the call")


def test_the_attention_kernel_refuses_a_q_of_three_dims():
    q = ad.ArraySpec((2, 128, 64), ad.bfloat16)
    k = ad.ArraySpec((1, 2, 128, 64), ad.bfloat16)
    with pytest.raises(ad.TraceError, match=r"q must have 4 dims \(B, H, S, D\), got shape \(2, 128, 64\)"):
        attention_kernel.compile(q, k, k, k, ad.ArraySpec((1, 2, 128), ad.float32))


def test_the_profile_command_names_itself_in_its_errors(tmp_path):
    from asyncdsl.cli import main

    script = tmp_path / "kernels.py"
    script.write_text("import asyncdsl as ad\n")
    with pytest.raises(SystemExit, match="asyncdsl profile: no kernel named 'k'"):
        main(["profile", f"{script}:k"])


def bool_iota_dim(x, y):
    ad.iota((64, 128), ad.int32, dim=True)  # the misuse


def expect_true_bytes(x, y):
    ad.barrier().arrive_expect_tx(True)  # the misuse


def approx_of_a_str(x, y):
    ad.exp2(ad.load(x.at[...]), approx="yes")  # the misuse


@pytest.mark.parametrize("body, fragment", [
    (bool_iota_dim, "dim True is not a dim"),
    (expect_true_bytes, "expect-tx bytes must be a Python int >= 0, got True"),
    (approx_of_a_str,
     "asyncdsl.exp2: approx must be True or False (a Python bool known while tracing), got 'yes'"),
])
def test_a_bool_where_a_number_or_a_flag_belongs_is_refused(body, fragment):
    # Each was taken as 1: an expect-tx of one byte then never completed, for one.
    test_a_kernel_body_misusing_an_entry_point_gets_a_trace_error_at_its_line(body, fragment)


@ad.kernel(grid=(1,))
def ring_of_one(x, y):
    a_ring = ad.smem((2, 64, 128), ad.float32)
    ring = ad.Pipeline(2, collective="x")  # a cluster of one CTA along x: a plain ring
    with ad.warpgroup_role(0):
        for step in ad.range(2):
            slot, landed = ring.produce(step)
            ad.async_copy(x.at[...], a_ring.at[slot], barrier=landed, collective="x")
            slot = ring.consume(step)
            ad.store(y.at[...], a_ring.at[slot][...])
            ring.release(step, after_wgmma=False)


def test_a_collective_ring_in_a_cluster_of_one_is_a_plain_ring():
    # Its release arrived collectively and was refused there, where its copies are plain copies.
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    y = np.zeros_like(x)
    ring_of_one.interpret(x, y)
    assert np.array_equal(y, x)


@ad.kernel(grid=(1,))
def reshaped_argument(x, y):
    x.shape = (128, 128)  # the misuse
    ad.store(y.at[...], ad.load(x.at[ad.ds(64, 64), :]))


def test_the_shape_of_a_kernel_argument_cannot_be_assigned():
    # It could: the bounds were then those of a larger array than the one passed.
    with pytest.raises(ad.TraceError, match="x.shape cannot be assigned") as caught:
        reshaped_argument.compile(F32, F32)
    assert caught.value.location.line == line_of(reshaped_argument.fn, "# the misuse")


@ad.kernel(grid=(1,))
def nested_too_deep(x, y, DEPTH: ad.constexpr):
    def nest(depth):
        if depth:
            for _ in ad.range(2):  # the misuse, repeated
                nest(depth - 1)

    nest(DEPTH)


def test_loops_nested_deeper_than_the_passes_can_walk_are_a_resource_error_at_the_loop():
    nested_too_deep.compile(F32, F32, DEPTH=50)  # deep, but within reach
    with pytest.raises(ad.ResourceError) as caught:
        nested_too_deep.compile(F32, F32, DEPTH=400)
    assert "nests loops and branches 402 deep" in caught.value.message, caught.value.message
    assert caught.value.location.line == line_of(nested_too_deep.fn, "# the misuse")
