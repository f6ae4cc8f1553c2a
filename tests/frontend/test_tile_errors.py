"""Misused register tiles are TraceErrors at the user's line, saying the rule."""

from __future__ import annotations

import numpy as np
import pytest
from support import expect, line_of

import asyncdsl as ad

F32 = ad.ArraySpec((64, 128), ad.float32)


def _expect(kernel, line_text: str, *fragments, spec=F32):
    with pytest.raises(ad.TraceError) as caught:
        kernel.compile(spec, spec)
    error = caught.value
    for fragment in fragments:
        assert fragment in error.message, (fragment, error.message)
    source = getattr(kernel.fn, "body", kernel.fn)  # a `_kernel`'s lines are in its body
    assert error.location is not None and error.location.line == line_of(source, line_text), error
    return error


def _kernel(body):
    """A kernel that loads x into `buf`, runs `body(buf, tile)`, and stores buf to y."""

    def traced(x, y):
        buf = ad.smem(x.shape, x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[:, :], buf, barrier=bar)
        bar.wait()
        body(buf, buf[...])
        ad.fence_async_smem()
        ad.async_copy(buf, y.at[:, :])
        ad.await_async_copy(0)

    traced.__name__ = body.__name__
    traced.body = body
    return ad.kernel(grid=(1,))(traced)


def test_a_tile_made_in_a_loop_and_used_after_it_says_to_use_registers():
    @ad.kernel(grid=(1,))
    def escaping(x, y):
        buf = ad.smem(x.shape, x.dtype)
        t = buf[...]
        for _ in ad.range(2):
            t = t + 1.0
        buf[...] = t  # used after the loop
        ad.fence_async_smem()
        ad.async_copy(buf, y.at[:, :])
        ad.await_async_copy(0)

    _expect(escaping, "# used after the loop", "asyncdsl.registers", "traced once")


@ad.kernel(grid=(1,))
def oversized(x, y, WHAT: ad.constexpr):
    if WHAT == "window":
        tile = ad.load(x.at[ad.ds(0, 1 << 20), :])  # the window
    elif WHAT == "iota":
        tile = ad.iota((1024, 1024), ad.int32, dim=0).astype(ad.float32)  # the iota
    else:
        tile = ad.load(x.at[ad.ds(0, 1), :]) + ad.zeros((1 << 14, 128), ad.float32)  # the broadcast
    ad.store(y.at[ad.ds(0, 1), :], tile.max(axis=0)[None, :])


@pytest.mark.parametrize("what, shape, registers",
                         [("window", (1 << 20, 128), 1 << 20), ("iota", (1024, 1024), 8192),
                          ("broadcast", (1 << 14, 128), 1 << 14)])
def test_a_tile_larger_than_a_warpgroups_registers_is_a_resource_error(what, shape, registers):
    # A (2**20, 128) window once hung the layout inference; an (8192, 8192) tile compiled for 43 s
    # into 44 MB of PTX that could only spill.
    with pytest.raises(ad.ResourceError) as caught:
        oversized.compile(F32, F32, WHAT=what)
    assert f"tile of shape {shape}" in caught.value.message and f"at least {registers} 32-bit registers" \
        in caught.value.message, caught.value.message
    assert caught.value.location.line == line_of(oversized.fn, f"# the {what}")


@ad.kernel(grid=(1,))
def constants(y, VALUE: ad.constexpr):
    ad.store(y.at[...], ad.full(y.shape, VALUE, y.dtype))  # the constant


def test_an_integer_constant_out_of_the_tiles_range_is_refused_at_its_line():
    # As numpy 2 refuses it (docs/register-tiles.md); wrapped, a comparison with it would be wrong.
    for dtype, value in ((np.int8, 1000), (np.int32, (1 << 40) + 5), (np.uint8, -1)):
        with pytest.raises(ad.TraceError, match="out of range") as caught:
            constants.interpret(np.zeros((64, 128), dtype), VALUE=value)
        assert caught.value.location.line == line_of(constants.fn, "# the constant")
    y = np.zeros((64, 128), np.int8)
    constants.interpret(y, VALUE=-128)
    assert (y == -128).all()


def test_an_int_too_large_for_a_float_tile_is_refused_at_the_line():
    with pytest.raises(ad.TraceError, match="an int of 1329 bits is too large for any float") as caught:
        constants.compile(F32, VALUE=10 ** 400)
    assert caught.value.location.line == line_of(constants.fn, "# the constant")


def test_a_tile_has_no_truth_value():
    def truthy(buf, t):
        if t > 0:  # noqa: SIM102
            pass

    _expect(_kernel(truthy), "if t > 0", "no Python truth value", "asyncdsl.where")


def test_mixing_dtypes_asks_for_astype():
    def mixed(buf, t):
        buf[...] = t + t.astype(ad.bfloat16).astype(ad.float32).astype(ad.bfloat16)

    _expect(_kernel(mixed), "buf[...] = t + t.astype", "float32 tile and a bfloat16 tile", ".astype(")


def test_shapes_that_do_not_broadcast():
    def unbroadcastable(buf, t):
        buf[...] = t + t.sum(axis=1)

    _expect(_kernel(unbroadcastable), "t + t.sum(axis=1)", "do not broadcast")


def test_stretching_the_size_1_dims_of_an_fp8_tile_asks_for_astype():
    @ad.kernel(grid=(1,))
    def repeated(x, y):
        ad.store(y.at[...], ad.load(x.at[...]))

    row, matrix = ad.ArraySpec((1, 128), ad.float8_e4m3fn), ad.ArraySpec((4, 128), ad.float8_e4m3fn)
    with pytest.raises(ad.TraceError) as caught:
        repeated.compile(row, matrix)
    assert "size-1 dims of a (1, 128) tile" in caught.value.message and "astype" in caught.value.message
    assert caught.value.location.line == line_of(repeated.fn, "ad.store(y.at[...]")


def test_storing_a_tile_of_the_wrong_dtype():
    def wrong_store(buf, t):
        buf[...] = t.astype(ad.bfloat16)

    _expect(_kernel(wrong_store), "buf[...] = t.astype", "does not fit", "float32")


def test_partial_reads_of_a_buffer_say_to_use_views():
    def partial(buf, t):
        buf[...] = buf[0:32, :] + 1.0

    _expect(_kernel(partial), "buf[0:32, :]", "whole buffer", "buf.at[i]")


def test_arithmetic_on_narrow_types_asks_for_astype():
    def narrow(buf, t):
        buf[...] = (t.astype(ad.int8) + 1).astype(ad.float32)

    _expect(_kernel(narrow), "t.astype(ad.int8) + 1",
            "arithmetic is on float32, bfloat16, float16 and int32", "astype")


def test_unsigned_tiles_are_refused():
    def unsigned(buf, t):
        buf[...] = t.astype(ad.uint32).astype(ad.float32)

    _expect(_kernel(unsigned), "t.astype(ad.uint32)", "register tiles hold", "uint32")


def test_astype_bool_says_to_compare():
    def to_bool(buf, t):
        t.astype(bool)

    _expect(_kernel(to_bool), "t.astype(bool)", "compare instead")


def test_transcendentals_compute_on_float32_tiles():
    def half_tanh(buf, t):
        buf[...] = ad.tanh(t.astype(ad.bfloat16)).astype(ad.float32)

    _expect(_kernel(half_tanh), "ad.tanh(t.astype", "float32 tiles", "astype(asyncdsl.float32)")


def test_sqrt_takes_float_tiles_and_approximates_float32_only():
    def int_root(buf, t):
        ad.sqrt(t.astype(ad.int32))

    _expect(_kernel(int_root), "ad.sqrt(t.astype", "float tiles, not int32")

    def approximate_half_root(buf, t):
        ad.sqrt(t.astype(ad.bfloat16), approx=True)

    _expect(_kernel(approximate_half_root), "ad.sqrt(t.astype", "approx=True", "float32")

    def half_root(buf, t):  # the correctly rounded root of a 16-bit float: no error
        buf[...] = ad.sqrt(abs(t).astype(ad.float16)).astype(ad.float32)

    _kernel(half_root).compile(F32, F32)


def test_argmax_takes_one_axis_and_mean_float_tiles():
    def flat_argmax(buf, t):
        t.argmax(axis=None)

    _expect(_kernel(flat_argmax), "t.argmax(axis=None)", "tile.argmax", "one axis")

    def argmin_of_two_axes(buf, t):
        t.argmin(axis=(0, 1))

    _expect(_kernel(argmin_of_two_axes), "t.argmin(axis=(0, 1))", "tile.argmin", "one axis")

    def int_mean(buf, t):
        t.astype(ad.int32).mean()

    _expect(_kernel(int_mean), "t.astype(ad.int32).mean()", "tile.mean", "astype(asyncdsl.float32)")


def test_integer_constants_out_of_the_tiles_range_are_refused_as_numpy_2_refuses_them():
    def compared_past_int32(buf, t):
        ad.where(t.astype(ad.int32) < 3_000_000_000, t, 0.0)

    _expect(_kernel(compared_past_int32), "t.astype(ad.int32) < 3_000_000_000", "3000000000 is out of range",
            "int32 (-2147483648 to 2147483647)")

    def added_past_int32(buf, t):
        t.astype(ad.int32) + 2**32

    _expect(_kernel(added_past_int32), "t.astype(ad.int32) + 2**32", "out of range for int32")

    def filled_past_uint8(buf, t):
        ad.full(t.shape, 256, ad.uint8)

    _expect(_kernel(filled_past_uint8), "ad.full(t.shape, 256, ad.uint8)",
            "out of range for uint8 (0 to 255)")

    def at_the_ends(buf, t):  # the ends of the range are constants like any other
        u = t.astype(ad.int32)
        buf[...] = ad.where((u < 2**31 - 1) & (u > -(2**31)), t, 0.0)

    _kernel(at_the_ends).compile(F32, F32)


def test_powers_other_than_numpys_exact_ones_and_numpy_functions_say_what_to_use():
    def cubed(buf, t):
        t ** 3

    _expect(_kernel(cubed), "t ** 3", "2, 1, 0", "-1 and 0.5", "exp2")

    def tile_power(buf, t):
        t ** t

    _expect(_kernel(tile_power), "t ** t", "the exponent is a Python number")

    def int_reciprocal(buf, t):
        t.astype(ad.int32) ** -1

    _expect(_kernel(int_reciprocal), "t.astype(ad.int32) ** -1", "for floats, -1 and 0.5")

    def numpy_exp(buf, t):
        np.exp(t)

    _expect(_kernel(numpy_exp), "np.exp(t)", "numpy's functions do not run on register tiles", "exp, log")

    def any_of_numbers(buf, t):
        t.any()

    _expect(_kernel(any_of_numbers), "t.any()", "tile.any is for bool tiles")

    def two_ellipses(buf, t):
        t[..., None, ...]

    _expect(_kernel(two_ellipses), "t[..., None, ...]", "at most one ...")


def test_a_load_of_an_array_no_tile_holds_names_the_array():
    @ad.kernel(grid=(1,))
    def doubles(x, y):
        ad.store(y.at[:], ad.load(x.at[:]) * 2)

    with pytest.raises(ad.TraceError) as caught:
        doubles.compile(ad.ArraySpec((128,), ad.float64), ad.ArraySpec((128,), ad.float64))
    message = caught.value.message
    assert "asyncdsl.load of x: register tiles hold" in message and "not float64" in message
    assert caught.value.location.line == line_of(doubles.fn, "ad.load(x.at[:])")


def test_a_reduction_over_no_axes_is_the_tile():
    def over_nothing(buf, t):
        buf[...] = t.sum(axis=()) + t.max(axis=[], keepdims=True)

    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    y = np.zeros_like(x)
    _kernel(over_nothing).interpret(x, y)
    assert np.array_equal(y, x + x)


def test_transcendentals_want_float32():
    def bf16_exp(buf, t):
        ad.exp2(t.astype(ad.bfloat16))

    _expect(_kernel(bf16_exp), "ad.exp2(t.astype", "float32", "astype")

    def bf16_natural_exp(buf, t):
        ad.exp(t.astype(ad.bfloat16))

    _expect(_kernel(bf16_natural_exp), "ad.exp(t.astype", "asyncdsl.exp", "float32", "astype")


def test_reductions_name_real_distinct_axes():
    def bad_axis(buf, t):
        t.max(axis=2)

    def twice(buf, t):
        t.sum(axis=(1, -1))

    def axis_of_a_total(buf, t):
        t.sum().min(axis=0)  # a 0-d tile has no axis 0 (reducing it with no axis is itself)

    _expect(_kernel(bad_axis), "t.max(axis=2)", "axis 2")
    _expect(_kernel(twice), "t.sum(axis=(1, -1))", "distinct axes")
    _expect(_kernel(axis_of_a_total), "t.sum().min(axis=0)", "axis 0", "() tile")


def test_a_tile_must_broadcast_to_what_it_is_stored_into():
    def wrong_rows(buf, t):
        buf[...] = t.sum(axis=1)  # (64,) does not broadcast to (64, 128): numpy aligns trailing dims

    def rows_into_a_row(buf, t):
        ad.store(buf.at[0], t.sum(axis=1))  # (64,) totals into a (128,) row

    _expect(_kernel(wrong_rows), "buf[...] = t.sum(axis=1)", "(64,) float32 tile does not fit the buffer")
    _expect(_kernel(rows_into_a_row), "ad.store(buf.at[0]",
            "(64,) float32 tile does not fit the buffer of (128,)")


def test_tiles_do_not_slice():
    def sliced(buf, t):
        t[0:2, :]

    _expect(_kernel(sliced), "t[0:2, :]", "only to add axes")


def test_iota_makes_int32_and_full_makes_numbers():
    def float_iota(buf, t):
        ad.iota((64, 128), ad.float32, dim=0)

    def bool_full(buf, t):
        ad.full((64, 128), 1, bool)

    _expect(_kernel(float_iota), "ad.iota((64, 128), ad.float32", "int32")
    _expect(_kernel(bool_full), "ad.full((64, 128), 1, bool)", "comparison")


def test_a_layout_argument_must_be_a_layout():
    def wrong_layout(buf, t):
        ad.load(buf, layout="wgmma")

    _expect(_kernel(wrong_layout), 'layout="wgmma"', "asyncdsl.WGMMA")


def test_registers_are_allocated_at_the_top_level_and_hold_tiles():
    @ad.kernel(grid=(1,))
    def nested(x, y):
        with ad.when(ad.program_id(0) == 0):
            ad.registers((64, 128), ad.float32)

    def not_a_tile(buf, t):
        acc = ad.registers((64, 128), ad.float32)
        acc[...] = 1.0

    _expect(nested, "ad.registers((64, 128)", "top level")
    _expect(_kernel(not_a_tile), "acc[...] = 1.0", "must be a register tile")


def test_tiles_outside_a_kernel_say_where_they_belong():
    with pytest.raises(ad.TraceError, match="inside a function decorated with @asyncdsl.kernel"):
        ad.zeros((64, 128), ad.float32)


def test_a_given_layout_that_does_not_fit_a_gmem_window_is_refused_at_its_line():
    @ad.kernel(grid=(1,))
    def rows_of_160(x, y):
        t = ad.load(x.at[ad.ds(0, 4), ad.ds(0, 160)], layout=ad.strided(1))
        ad.store(y.at[ad.ds(0, 4), ad.ds(0, 160)], t)

    spec = ad.ArraySpec((8, 160), ad.float32)
    with pytest.raises(ad.LayoutError) as caught:
        rows_of_160.compile(spec, spec)
    assert "(4, 160) tile in layout strided(1)" in caught.value.message
    assert "Leave the layout to infer-layouts" in caught.value.message
    assert caught.value.location.line == line_of(rows_of_160.fn, "layout=ad.strided(1)")
    rows_of_160_inferred = ad.kernel(grid=(1,))(_without_layout)
    x = np.random.default_rng(0).standard_normal((8, 160)).astype(np.float32)
    y = np.zeros_like(x)
    rows_of_160_inferred.interpret(x, y)  # the row layout: a warp a row, a lane every 32nd element
    assert np.array_equal(y[:4], x[:4]) and not y[4:].any()


def _without_layout(x, y):
    ad.store(y.at[ad.ds(0, 4), ad.ds(0, 160)], ad.load(x.at[ad.ds(0, 4), ad.ds(0, 160)]))


def test_floor_division_and_shifts_are_for_int32_tiles():
    def floats_floor_divided(buf, t):
        buf[...] = t // 2.0

    _expect(_kernel(floats_floor_divided), "t // 2.0", "// of register tiles", "not defined for float32", "/")

    def floats_shifted(buf, t):
        buf[...] = t << 1

    _expect(_kernel(floats_shifted), "t << 1", "<< of register tiles", "not defined for float32")

    def floats_inverted(buf, t):
        buf[...] = ~t

    _expect(_kernel(floats_inverted), "~t", "~tile is for int32 tiles and bool masks, not float32")

    def masks_divided(buf, t):
        buf[...] = ad.where((t > 0) // (t < 1), t, t)

    _expect(_kernel(masks_divided), "(t > 0) // (t < 1)", "a bool tile does not compute", "int32")

    def divided_by_zero(buf, t):
        buf[...] = (t.astype(ad.int32) % 0).astype(ad.float32)

    _expect(_kernel(divided_by_zero), "t.astype(ad.int32) % 0", "division by zero")

    def shifted_back(buf, t):
        buf[...] = (t.astype(ad.int32) << -1).astype(ad.float32)

    _expect(_kernel(shifted_back), "t.astype(ad.int32) << -1", "negative shift count")

    def shifted_by_a_tile(buf, t):  # amounts in a tile are read unsigned, as documented: no error
        buf[...] = (t.astype(ad.int32) >> (t.astype(ad.int32) & 7)).astype(ad.float32)

    _kernel(shifted_by_a_tile).compile(F32, F32)

    def masks_inverted(buf, t):
        buf[...] = ad.where(~(t > 0), t, 0.0)  # a mask negated: no error

    _kernel(masks_inverted).compile(F32, F32)


# -- traced values used outside the body they were traced in -------------------------------------
# The PTX read the loop's register after its exit (3 where Python leaves 2) or one a skipped branch
# never set, and the interpreter failed with xDSL's KeyError: every traced value, scalars too, is
# refused at the line that uses it.
I32 = ad.ArraySpec((128,), ad.int32)


@ad.kernel(grid=(1,))
def index_after_loop(x, y):
    for i in ad.range(3):
        pass
    ad.store(y.at[:], ad.load(x.at[:]) + i)  # the index after the loop


@ad.kernel(grid=(1,))
def scalar_after_loop(x, y):
    for i in ad.range(3):
        j = i * 4
    ad.store(y.at[:], ad.load(x.at[:]) + j)  # j after the loop


@ad.kernel(grid=(1,))
def scalar_after_when(x, y, n: int):
    with ad.when(n > 0):
        s = n * 2
    ad.store(y.at[:], ad.load(x.at[:]) + s)  # s after the branch


@ad.kernel(grid=(1,))
def scalar_in_a_later_body(x, y):
    for i in ad.range(3):
        j = i * 4
    for _ in ad.range(2):
        ad.store(y.at[:], ad.load(x.at[:]) + j)  # j in the next loop


@ad.kernel(grid=(1,))
def scalar_after_a_nested_when(x, y):
    for i in ad.range(3):
        with ad.when(i > 0):
            j = i - 1
        ad.store(y.at[:], ad.load(x.at[:]) + j)  # j after the branch, in the loop


def _body_line(kernel, text: str) -> str:
    return f"at line {line_of(kernel.fn, text)}"


def test_the_index_of_a_loop_used_after_it_is_refused_at_the_use():
    expect(ad.TraceError, index_after_loop, (I32, I32), {},
           f"the index of the asyncdsl.range loop {_body_line(index_after_loop, 'ad.range(3)')}",
           "exists only inside its body", "stop - 1", line_text="# the index after the loop")


def test_a_scalar_computed_in_a_loop_used_after_it_is_refused_at_the_use():
    expect(ad.TraceError, scalar_after_loop, (I32, I32), {},
           f"computed inside the asyncdsl.range loop {_body_line(scalar_after_loop, 'ad.range(3)')}",
           "cannot be used after it", "outside the body", "asyncdsl.registers",
           line_text="# j after the loop")


def test_a_scalar_computed_under_when_used_after_it_is_refused_at_the_use():
    expect(ad.TraceError, scalar_after_when, (I32, I32, 5), {},
           f"computed inside the asyncdsl.when block {_body_line(scalar_after_when, 'ad.when(n > 0)')}",
           "cannot be used after it", line_text="# s after the branch")


def test_a_scalar_used_in_a_later_sibling_body_is_refused_at_the_use():
    expect(ad.TraceError, scalar_in_a_later_body, (I32, I32), {},
           f"inside the asyncdsl.range loop {_body_line(scalar_in_a_later_body, 'ad.range(3)')}",
           line_text="# j in the next loop")
    # the body that has ended is named, not the loop still open around the use
    expect(ad.TraceError, scalar_after_a_nested_when, (I32, I32), {},
           f"inside the asyncdsl.when block {_body_line(scalar_after_a_nested_when, 'ad.when(i > 0)')}",
           line_text="# j after the branch, in the loop")


@ad.kernel(grid=(1,))
def enclosing_scalars(x, y, n: int):
    base = n * 2  # outside every body: read in the loops and branches below
    acc = ad.registers((128,), ad.int32)
    acc[...] = ad.zeros((128,), ad.int32)
    for i in ad.range(3):
        step = i + base
        with ad.when(step > base):
            for j in ad.range(2):
                acc[...] = acc[...] + ad.full((128,), step * j + base, ad.int32)
    with ad.when(n > 0):
        acc[...] = acc[...] + ad.full((128,), n * 3, ad.int32)  # carried out of the branch
    ad.store(y.at[:], ad.load(x.at[:]) + acc[...] + base)


def test_scalars_of_enclosing_bodies_trace_interpret_and_assemble(ptxas):
    x = np.arange(128, dtype=np.int32)
    y = np.zeros_like(x)
    enclosing_scalars.interpret(x, y, 5)
    # base 10; i = 1 and 2 take the branch: (10 + 21) + (10 + 22); the second branch adds 15
    assert np.array_equal(y, x + 63 + 15 + 10)
    ptxas(enclosing_scalars.ptx(I32, I32, 5))


def test_a_view_used_in_a_loop_and_after_it_is_broadcast_where_each_use_is(ptxas):
    # The broadcast traced for the view's use in the loop's body was once taken again after it.
    @ad.kernel(grid=(1,))
    def view_twice(r, y):
        v = ad.load(r.at[:])[:, None]
        acc = ad.registers((128,), ad.float32)
        acc[...] = ad.zeros((128,), ad.float32)
        for _ in ad.range(2):
            acc[...] = acc[...] + v.max(axis=1)
        ad.store(y.at[:], acc[...] + v.max(axis=1))

    r = np.arange(128, dtype=np.float32)
    y = np.zeros_like(r)
    view_twice.interpret(r, y)
    assert np.array_equal(y, 3 * r)
    spec = ad.ArraySpec((128,), ad.float32)
    ptxas(view_twice.ptx(spec, spec))


@ad.kernel(grid=(1,))
def int_tile_plus_a_fraction(x, y):
    ad.store(y.at[:], ad.load(x.at[:]) + 0.5)  # an int32 tile and 0.5


@ad.kernel(grid=(1,))
def tile_through_builtin_sum(x, y):
    t = ad.load(x.at[:])
    ad.store(y.at[:], t + sum(t))  # Python's sum iterates


def test_a_fraction_with_an_int_tile_is_refused_naming_the_arithmetic():
    # The number becomes a splat of the tile's dtype: the refusal names the user's operation
    # (not asyncdsl.full, which the user never called) and the conversion that makes it work.
    expect(ad.TraceError, int_tile_plus_a_fraction, (I32, I32), {}, "arithmetic on register tiles",
           "0.5 is not an integer", "int32", "astype", line_text="# an int32 tile and 0.5")


def test_python_iteration_over_a_tile_is_refused_pointing_at_the_reductions():
    expect(ad.TraceError, tile_through_builtin_sum, (I32, I32), {}, "not iterable", "tile.sum(axis)",
           line_text="# Python's sum iterates")
