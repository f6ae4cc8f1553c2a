"""wgmma misused: TraceErrors at the user's line that say the rule (and, for a layout the tensor
cores cannot read, the layout that would do)."""

from __future__ import annotations

import pytest
from support import line_of

import asyncdsl as ad
from asyncdsl import TileTransform

BF16 = ad.ArraySpec((64, 64), ad.bfloat16)
F32 = ad.ArraySpec((64, 64), ad.float32)
LAYOUT = dict(transforms=TileTransform((8, 64)), swizzle=128)


def _expect(kernel, line_text: str, *fragments, args=(BF16, BF16, F32), **constexprs):
    with pytest.raises(ad.TraceError) as caught:
        kernel.compile(*args, **constexprs)
    error = caught.value
    for fragment in fragments:
        assert fragment in error.message, (fragment, error.message)
    assert error.location is not None and error.location.line == line_of(kernel.fn, line_text), error


@ad.kernel(grid=(1,), block=128)
def in_flight(a, b, c, WHAT: ad.constexpr):
    a_s = ad.smem(a.shape, a.dtype, **LAYOUT)
    b_s = ad.smem(b.shape, b.dtype, **LAYOUT)
    acc = ad.registers((64, 64), ad.float32, layout=ad.WGMMA)
    ad.wgmma(acc, a_s, b_s, accumulate=False)  # issued here
    if WHAT == "read":
        ad.store(c, acc[...])  # too early: read
    elif WHAT == "write":
        acc[...] = ad.zeros((64, 64), ad.float32)  # too early: write
    else:
        ad.wgmma(acc, a_s, b_s)
        ad.wgmma_wait(1)  # the newest may still run
        ad.store(c, acc[...])  # too early: wait_one


@pytest.mark.parametrize("what", ["read", "write", "wait_one"])
def test_touching_an_accumulator_in_flight_is_an_error_naming_the_wgmma(what):
    issued = (line_of(in_flight.fn, "issued here") if what != "wait_one"
              else line_of(in_flight.fn, "ad.wgmma(acc, a_s, b_s)\n"))
    _expect(in_flight, f"too early: {what}", "may still be writing these registers", f":{issued}",
            "wgmma_wait(0)", WHAT=what)


@ad.kernel(grid=(1,), block=128)
def unreadable(a, b, c, SWIZZLE: ad.constexpr):
    a_s = ad.smem(a.shape, a.dtype, transforms=ad.TransposeTransform((1, 0)), swizzle=SWIZZLE)
    b_s = ad.smem(b.shape, b.dtype, **LAYOUT)
    acc = ad.registers((64, 64), ad.float32, layout=ad.WGMMA)
    ad.wgmma(acc, a_s, b_s, accumulate=False)  # the wgmma
    ad.wgmma_wait(0)


def test_a_layout_the_tensor_cores_cannot_read_names_the_ones_they_can():
    _expect(unreadable, "the wgmma", "transforms (transpose(1, 0))", "TileTransform((8, 64)), swizzle=128",
            SWIZZLE=128)
    _expect(unreadable, "the wgmma", "must carry a swizzled layout", SWIZZLE=0)


@ad.kernel(grid=(1,), block=128)
def typed(a, b, c, N: ad.constexpr, TRANSPOSED: ad.constexpr):
    a_s = ad.smem(a.shape, a.dtype, transforms=TileTransform((8, 128 // a.dtype.itemsize)), swizzle=128)
    b_s = ad.smem(b.shape, b.dtype, transforms=TileTransform((8, 128 // b.dtype.itemsize)), swizzle=128)
    acc = ad.registers((64, N), c.dtype, layout=ad.WGMMA)
    ad.wgmma(acc, a_s, b_s.T if TRANSPOSED else b_s, accumulate=False)  # the wgmma
    ad.wgmma_wait(0)


def test_types_shapes_and_majors_the_instruction_lacks_are_errors_at_the_line():
    fp8 = ad.ArraySpec((64, 128), ad.float8_e4m3fn)
    _expect(typed, "the wgmma", "only 16-bit types can be transposed",
            args=(fp8, ad.ArraySpec((128, 128), ad.float8_e4m3fn), ad.ArraySpec((64, 128), ad.float32)),
            N=128, TRANSPOSED=False)
    _expect(typed, "the wgmma", "float16 accumulators are not supported",
            args=(ad.ArraySpec((64, 64), ad.float16), ad.ArraySpec((64, 64), ad.float16),
                  ad.ArraySpec((64, 64), ad.float16)), N=64, TRANSPOSED=False)
    _expect(typed, "the wgmma", "do not agree", args=(BF16, ad.ArraySpec((64, 128), ad.bfloat16), F32),
            N=64, TRANSPOSED=False)


@ad.kernel(grid=(1,), block=128)
def not_registers(a, b, c):
    a_s = ad.smem(a.shape, a.dtype, **LAYOUT)
    b_s = ad.smem(b.shape, b.dtype, **LAYOUT)
    ad.wgmma(ad.zeros((64, 64), ad.float32), a_s, b_s)  # the wgmma


def test_the_accumulator_must_be_registers():
    _expect(not_registers, "the wgmma", "acc must be registers")


@ad.kernel(grid=(1,), block=128)
def too_wide(a, b, c, N: ad.constexpr):
    a_s = ad.smem(a.shape, a.dtype, **LAYOUT)
    b_s = ad.smem(b.shape, b.dtype, **LAYOUT)
    acc = ad.registers((128, N), ad.float32, layout=ad.WGMMA)
    ad.wgmma(acc, a_s, b_s, accumulate=False)  # the wgmma
    ad.wgmma_wait(0)


def test_an_accumulator_that_cannot_stay_in_registers_is_an_error():
    args = (ad.ArraySpec((128, 64), ad.bfloat16), ad.ArraySpec((64, 256), ad.bfloat16), F32)
    _expect(too_wide, "the wgmma", "take 256 registers per thread",
            "the 255 each thread of this 128-thread CTA", "split the tile", args=args, N=256)
    too_wide.compile(ad.ArraySpec((128, 64), ad.bfloat16), ad.ArraySpec((64, 192), ad.bfloat16), F32, N=192)


@ad.kernel(grid=(1,), block=128)
def two_from_one_line(a, b, c):
    a_s = ad.smem(a.shape, a.dtype, **LAYOUT)
    b_s = ad.smem(b.shape, b.dtype, **LAYOUT)
    accumulators = [ad.registers((64, 256), ad.float32, layout=ad.WGMMA) for _ in range(2)]
    for acc in accumulators:
        ad.wgmma(acc, a_s, b_s, accumulate=False)  # the wgmma
    ad.wgmma_wait(0)


def test_accumulators_issued_from_one_line_are_counted_each():
    _expect(two_from_one_line, "the wgmma", "take 256 registers per thread",
            args=(BF16, ad.ArraySpec((64, 256), ad.bfloat16), ad.ArraySpec((64, 256), ad.float32)))
