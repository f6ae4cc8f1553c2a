"""Runtime scalar arguments: which parameters are runtime ints and floats, what a specialization
knows of them (kind, and whether an int is a multiple of 16, never the value), traced float
arithmetic and its use with register tiles, the warm path's scalars, and errors at the user's line."""

from __future__ import annotations

import numpy as np
import pytest
from support import device_array, expect

import asyncdsl as ad
from asyncdsl.runtime.module_cache import cubin_key

F32 = ad.ArraySpec((256, 64), ad.float32)
F32_3D = ad.ArraySpec((2, 128, 64), ad.float32)
B = 16


@ad.kernel(grid=lambda x, y, row0, count: (1,))
def copy_rows(x, y, row0: int, count):
    """Copy `count` tiles of B rows from row `row0` on; `count` is a runtime int by its value."""
    buf = ad.smem((B, x.shape[1]), x.dtype)
    bar = ad.barrier()
    for i in ad.range(count):
        rows = ad.ds(row0 + i * B, B)
        ad.async_copy(x.at[rows, :], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[rows, :])
        ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def gated(x, y, scale: float, threshold):
    """Copy x to y where `scale * 2 > threshold` (two runtime floats)."""
    buf = ad.smem(x.shape, x.dtype)
    bar = ad.barrier()
    with ad.when(scale * 2.0 > threshold):
        ad.async_copy(x, buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y)
        ad.await_async_copy(0)


def _signature_line(ir: str) -> str:
    return next(line for line in ir.splitlines() if "func.func" in line)


# -- which parameters are scalars ------------------------------------------------------------------


def test_annotations_and_values_make_runtime_scalars():
    signature = _signature_line(copy_rows.ir(F32, F32, 32, 3))
    assert "%2: index {asyncdsl.divisor = 16 : i64}" in signature and "%3: index loc" in signature
    assert 'asyncdsl.arg_names = ["x", "y", "row0", "count"]' in signature
    signature = _signature_line(gated.ir(F32, F32, 1, np.float16(0.5)))  # an int to a float param
    assert "%2: f32" in signature and "%3: f32" in signature


def test_numpy_scalars_and_the_types_themselves_are_runtime_scalars():
    for count in (np.int64(3), np.uint8(3), int):
        assert "%3: index loc" in _signature_line(copy_rows.ir(F32, F32, 32, count))
    for threshold in (np.float64(0.5), np.float16(2), float, 2.0):
        assert "%3: f32" in _signature_line(gated.ir(F32, F32, 0.5, threshold))


def test_string_annotations_are_read_too():
    namespace = {}
    exec(
        "from __future__ import annotations\nimport asyncdsl as ad\n"
        "def body(x, n: int, s: float, B: ad.constexpr):\n    pass\n",
        namespace,
    )
    k = ad.kernel(grid=(1,))(namespace["body"])
    assert k.constexpr_names == ("B",) and k.runtime_names == ("x", "n", "s")
    signature = _signature_line(k.ir(F32, 3, 2, B=4))
    assert "%1: index loc" in signature and "%2: f32" in signature


# -- what a specialization knows -------------------------------------------------------------------


def test_scalar_values_share_a_specialisation_but_kinds_and_divisibility_do_not(compilations):
    first = copy_rows.compile(F32, F32, 32, 3)
    assert copy_rows.compile(F32, F32, 64, 1) is first  # other values, same kernel
    assert copy_rows.compile(F32, F32, 48, np.int32(7)) is first
    assert compilations[0] <= 1
    odd = copy_rows.compile(F32, F32, 8, 3)  # not a multiple of 16: another kernel
    assert odd is not first and copy_rows.compile(F32, F32, 9, 3) is odd
    as_float = gated.compile(F32, F32, 1, 0.5)  # an unannotated parameter: its kind comes from the value
    as_int = gated.compile(F32, F32, 1, 2)
    assert as_int is not as_float and gated.compile(F32, F32, 3, 1) is as_int
    assert "%3: index" in as_int.traced


def test_the_disk_cache_key_holds_the_kind_but_not_the_value():
    first, second = copy_rows.compile(F32, F32, 32, 3), copy_rows.compile(F32, F32, 96, 5)
    assert first.ptx == second.ptx
    as_float, as_int = gated.compile(F32, F32, 1, 0.5), gated.compile(F32, F32, 1, 2)
    assert cubin_key(as_float.ptx, "sm_90a", 13000, "c") != cubin_key(as_int.ptx, "sm_90a", 13000, "c")


def test_a_multiple_of_8_is_what_a_3d_tiled_copy_needs_proven():
    @ad.kernel(grid=(1,))
    def tiled(x, y, row0: int):
        buf = ad.smem((2, 2, 1, 8, 64), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[:, ad.ds(row0, 16), :], buf, barrier=bar, transforms=(ad.TileTransform((8, 64)),))
        bar.wait()

    # A specialization on 32 proves a multiple of 16; on 8 nothing, and a 3-d window goes one
    # tensor map through the tiling (a 2-d one would go a box a tile from any row).
    tiled.compile(F32_3D, F32_3D, 32)
    expect(ad.CopyError, tiled, (F32_3D, F32_3D, 8), {}, "can only prove it a multiple of 1",
           "multiple_of(start, 8)", line_text="ad.async_copy(x.at")
    # A hint proves more than the specialization knows.
    @ad.kernel(grid=(1,))
    def hinted(x, y, row0: int):
        buf = ad.smem((4, 1, 8, 64), x.dtype)
        bar = ad.barrier()
        start = ad.multiple_of(row0, 32)
        ad.async_copy(x.at[ad.ds(start, 32), :], buf, barrier=bar, transforms=(ad.TileTransform((8, 64)),))
        bar.wait()

    hinted.compile(F32, F32, 40)


# -- traced floats ---------------------------------------------------------------------------------


def test_float_arithmetic_is_float32_and_mixes_with_indices_and_python_numbers():
    @ad.kernel(grid=(1,))
    def arithmetic(x, s: float, n: int):
        with ad.when((s * 0.1 + n) / 3 - (2 - s) < -s):
            pass
        with ad.when(n / 2 != 1.5):
            pass

    ir = arithmetic.ir(F32, 0.5, 3)
    for op in ("arith.mulf", "arith.addf", "arith.divf", "arith.subf", "arith.negf", "arith.sitofp",
               "arith.cmpf olt", "arith.cmpf une"):
        assert op in ir, op
    assert "arith.constant 1.000000e-01 : f32" in ir  # a Python float rounded to float32


@pytest.mark.parametrize(
    "body, message",
    [
        ("x.at[ad.ds(s, 4)]",
         "ds start must be an integer or a traced index, got FloatScalar(f32, argument 's')"),
        ("int(s)", "a traced float cannot be used as an integer or an index"),
        ("n + s // 2", "// and % are index arithmetic; a traced float has neither"),
        ("if s: pass", "a float computed on the GPU has no Python truth value"),
        ("float(s)", "a float computed on the GPU has no Python value while tracing"),
        ("ad.full((64,), s, ad.int32)", "asyncdsl.full: a traced float cannot become a int32 tile"),
        ("ad.smem((n,), ad.float32)", "got (Scalar(index, argument 'n'),)"),
        ("[0] * n", "argument 'n' is a runtime int of the kernel"),
    ],
)
def test_misused_scalars_are_trace_errors_at_the_users_line(body, message):
    namespace = {"ad": ad}
    source = f"def body(x, n: int, s: float):\n    if True:\n        {body}  # the line\n"
    exec(compile(source, __file__, "exec"), namespace)
    k = ad.kernel(grid=(1,))(namespace["body"])
    with pytest.raises(ad.TraceError) as caught:
        k.compile(ad.ArraySpec((64,), ad.float32), 1, 1.0)
    assert message in str(caught.value)
    assert (caught.value.location.file, caught.value.location.line) == (__file__, 3)


def test_floats_and_ints_combine_with_register_tiles():
    @ad.kernel(grid=(1,))
    def tiles(x, scale: float, n: int):
        buf = ad.smem((64, 64), ad.float32)
        t = buf[...]
        a = t * scale + ad.full((64, 64), scale * 2.0, ad.float32)
        b = scale * t - n * t
        buf[...] = ad.where(t > scale, a, b / scale)
        half = ad.smem((64, 64), ad.bfloat16)
        half[...] = ad.full((64, 64), scale, ad.bfloat16) + t.astype(ad.bfloat16)

    ir = tiles.ir(F32, 0.5, 3, after="infer-layouts")
    assert ir.count("asyncdsl.splat %1") >= 3  # the float argument, splat where tiles meet it
    assert "asyncdsl.convert %1 : f32 -> bf16" in ir
    assert "asyncdsl.compare gt" in ir


# -- errors of the call ----------------------------------------------------------------------------


def test_scalars_that_do_not_fit_are_argument_errors_naming_the_parameter():
    for value in (2**31, -(2**31) - 1, np.int64(2**40)):
        with pytest.raises(ad.ArgumentError,
                           match=r"argument 'row0' is -?\d+, outside the kernel's 32-bit int") as caught:
            copy_rows.compile(F32, F32, value, 1)  # the call
        assert caught.value.location.file == __file__
    copy_rows.compile(F32, F32, 2**31 - 16, -(2**31))
    with pytest.raises(ad.ArgumentError, match=r"argument 'scale' is 1e\+39, beyond the float32 range"):
        gated.compile(F32, F32, 1e39, 0.0)
    gated.compile(F32, F32, float("inf"), float("nan"))
    with pytest.raises(ad.ArgumentError,
                       match=r"argument 'row0' of the kernel is a runtime int, but got float 1.5"):
        copy_rows.compile(F32, F32, 1.5, 1)
    with pytest.raises(ad.ArgumentError,
                       match=r"argument 'row0' of the kernel is a runtime int, but got bool True"):
        copy_rows.compile(F32, F32, True, 1)
    with pytest.raises(ad.ArgumentError, match=r"argument 'count' is a bool; .* pass int\(count\)"):
        copy_rows.compile(F32, F32, 16, False)
    with pytest.raises(ad.ArgumentError,
                       match=r"argument 'scale' of the kernel is a runtime float, but got ndarray"):
        gated.compile(F32, F32, np.zeros(4), 0.5)


def test_the_interpreter_checks_scalars_as_the_gpu_does():
    x = np.zeros((256, 64), np.float32)
    with pytest.raises(ad.ArgumentError, match="argument 'count' is 4294967296, outside"):
        copy_rows.interpret(x, x.copy(), 16, 2**32)


# -- the warm path ---------------------------------------------------------------------------------


def per_tile_kernel():
    """A fresh kernel (its own warm path): one CTA per tile, and the grid reads the runtime `count`."""

    @ad.kernel(grid=lambda x, y, row0, count, scale: (max(count, 1),))
    def per_tile(x, y, row0: int, count: int, scale: float):
        buf = ad.smem((B, x.shape[1]), x.dtype)
        bar = ad.barrier()
        rows = ad.ds(row0 + ad.program_id(0) * B, B)
        with ad.when(scale > 0.0):
            ad.async_copy(x.at[rows, :], buf, barrier=bar)
            bar.wait()
            ad.async_copy(buf, y.at[rows, :])
            ad.await_async_copy(0)

    return per_tile


def test_new_scalar_values_launch_warm_without_compiling(recorded, compilations):
    per_tile = per_tile_kernel()
    x, y = device_array((256, 64), 0x10000), device_array((256, 64), 0x80000)
    per_tile(x, y, 0, 4, 1.0)
    per_tile(x, y, 32, 2, -0.5)
    per_tile(x, y, row0=64, count=3, scale=2.5)  # by name: warm too
    per_tile(x, y, 16, count=1, scale=0.25)
    calls = [call for kernel in recorded.values() for call in kernel.calls]
    assert calls == [
        ("checked", (4, 1, 1), (0x10000, 0x80000), (0, 4, 1.0)),
        ("warm", (2, 1, 1), (0x10000, 0x80000), (32, 2, -0.5)),  # the grid function sees `count`
        ("warm", (3, 1, 1), (0x10000, 0x80000), (64, 3, 2.5)),
        ("warm", (1, 1, 1), (0x10000, 0x80000), (16, 1, 0.25)),
    ]
    assert compilations[0] == 1 and len(recorded) == 1


def test_an_int_of_the_other_divisibility_compiles_once_more_then_is_warm(recorded, compilations):
    per_tile = per_tile_kernel()
    x, y = device_array((256, 64), 0x20000), device_array((256, 64), 0x90000)
    per_tile(x, y, 48, 1, 1.0)
    per_tile(x, y, 8, 1, 1.0)
    per_tile(x, y, 24, 1, 1.0)
    (kernel,) = recorded.values()
    kinds = [call[0] for call in kernel.calls]
    assert kinds == ["checked", "checked", "warm"]
    assert compilations[0] == 2  # (to the same PTX here: nothing in this kernel needed the fact)


def test_numpy_scalars_take_the_checked_path_and_do_not_compile(recorded, compilations):
    per_tile = per_tile_kernel()
    x, y = device_array((256, 64), 0x30000), device_array((256, 64), 0xA0000)
    per_tile(x, y, 0, 2, 1.0)
    per_tile(x, y, np.int64(0), 2, np.float32(1.0))
    calls = [call for kernel in recorded.values() for call in kernel.calls]
    assert [call[0] for call in calls] == ["checked", "checked"]
    assert calls[1][3] == (0, 2, 1.0)
    assert compilations[0] == 1



@ad.kernel(grid=(1,))
def copy_through(x, y):
    ad.store(y.at[:, :], ad.load(x.at[:, :]))  # x used as an array


@pytest.mark.parametrize("number", [1.0, 3], ids=["float", "int"])
def test_a_number_passed_for_an_array_is_refused_saying_so(number):
    # The number becomes a traced scalar, and `x.at` fails on it: the refusal says what to pass
    # rather than only that a 'FloatScalar' object has no attribute 'at'.
    expect(ad.TraceError, copy_through, (number, F32), {}, "a traced scalar", "has no 'at'",
           "pass an array for that argument", line_text="# x used as an array")
