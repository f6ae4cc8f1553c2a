"""PTX of kernels over windows of shared-memory buffers assembles for sm_90a, and a window's
address is its buffer's plus the window's rows (or whole column tiles): an immediate for a
static start, one multiply-add for a traced one.  Their IR prints and parses back at every stage."""

from __future__ import annotations

import re

import pytest
from smem_window_kernels import (
    REGISTER_LAYOUTS,
    SWIZZLES,
    columns_through_windows,
    multicast_into_a_window,
    registers_through_windows,
    tma_through_halves,
    tma_traced_window,
    wgmma_on_column_windows,
    wgmma_on_windows,
)
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.passes.pipeline import PASS_NAMES, ir_text, make_context

LAYOUTS = (None, *SWIZZLES)
SPEC = ad.ArraySpec((128, 64), ad.bfloat16)


@pytest.mark.parametrize("swizzle", LAYOUTS)
def test_tma_through_windows_assembles(ptxas, swizzle):
    ptx = tma_through_halves.compile(SPEC, SPEC, SWIZZLE=swizzle, HALF=64).binary.ptx
    ptxas(ptx)
    # Slot 1 of the ring is 16384 bytes in, its second half 8192 more: 24576 from the base.
    assert re.search(r"add\.s32 %r\d+, %r\d+, 8192;", ptx), ptx


@pytest.mark.parametrize("swizzle", LAYOUTS)
def test_a_traced_window_start_is_one_multiply_add(ptxas, swizzle):
    ptx = tma_traced_window.compile(SPEC, SPEC, SWIZZLE=swizzle).binary.ptx
    ptxas(ptx)
    assert re.search(r"mad\.lo\.s32 %r\d+, %r\d+, 128, %r\d+;", ptx), ptx  # rows of 128 bytes


@pytest.mark.parametrize("swizzle", LAYOUTS)
def test_a_multicast_load_into_a_window_assembles(ptxas, swizzle):
    x = ad.ArraySpec((64, 64), ad.bfloat16)
    ptx = multicast_into_a_window.compile(x, SPEC, SWIZZLE=swizzle).binary.ptx
    ptxas(ptx)
    assert ".multicast::cluster" in ptx


@pytest.mark.parametrize("dtype", (ad.float32, ad.bfloat16), ids=str)
@pytest.mark.parametrize("swizzle", LAYOUTS)
@pytest.mark.parametrize("layout", REGISTER_LAYOUTS)
def test_register_access_through_windows_assembles(ptxas, dtype, swizzle, layout):
    spec = ad.ArraySpec((128, 64), dtype)
    ptx = registers_through_windows.compile(spec, spec, SWIZZLE=swizzle, LAYOUT=layout).binary.ptx
    ptxas(ptx)
    if dtype == ad.bfloat16 and layout == "wgmma" and swizzle:  # whole matrices: ldmatrix/stmatrix
        assert "ldmatrix" in ptx and "stmatrix" in ptx


@pytest.mark.parametrize("n", (64, 128))
def test_wgmma_on_windows_assembles(ptxas, n):
    a = ad.ArraySpec((128, 64), ad.bfloat16)
    b = ad.ArraySpec((128, n), ad.bfloat16)
    c = ad.ArraySpec((128, n), ad.float32)
    ptx = wgmma_on_windows.compile(a, b, c, N=n).binary.ptx
    ptxas(ptx)
    assert ptx.count("wgmma.mma_async") == 2 * 64 // 16  # two halves, four K steps each


@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_column_windows_assemble(ptxas, swizzle):
    span = (swizzle or 64) // 2
    x = ad.ArraySpec((64, 3 * span), ad.bfloat16)
    ptx = columns_through_windows.compile(x, ad.ArraySpec((2, 64, 3 * span), ad.bfloat16),
                                          SWIZZLE=swizzle).binary.ptx
    ptxas(ptx)
    # A column of a (64, span) tile spans 128 bytes: a traced start of whole tiles, one multiply-add.
    assert re.search(r"mad\.lo\.s32 %r\d+, %r\d+, 128, %r\d+;", ptx), ptx


def test_wgmma_on_column_windows_assembles(ptxas):
    ptx = wgmma_on_column_windows.compile(ad.ArraySpec((64, 128), ad.bfloat16),
                                          ad.ArraySpec((64, 64), ad.float32)).binary.ptx
    ptxas(ptx)
    assert ptx.count("wgmma.mma_async") == 64 // 16


@pytest.mark.parametrize("stage", ["trace", *PASS_NAMES])
def test_windows_round_trip_through_every_stage(stage):
    text = tma_traced_window.stages(SPEC, SPEC, SWIZZLE=128)[stage]
    columns = columns_through_windows.stages(ad.ArraySpec((64, 192), ad.bfloat16),
                                             ad.ArraySpec((2, 64, 192), ad.bfloat16), SWIZZLE=128)[stage]
    if stage == "trace":
        assert "asyncdsl.smem_window" in text and " dim 1]" in columns
    for printed in (text, columns):
        parsed = Parser(make_context(), printed).parse_module()
        parsed.verify()
        assert ir_text(parsed) == printed
