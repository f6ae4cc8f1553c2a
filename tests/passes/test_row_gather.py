"""Row gathers and scatters (Blackwell `.tile::gather4` / `.tile::scatter4`): the IR, PTX
assembled for sm_100a, the refusal on sm_90a, the interpreter against numpy, and an error for
every rule."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support import line_of, random_bits, same_bytes
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.errors import UnsupportedTargetError
from asyncdsl.kernel_binary import TiledTensorMapSpec
from asyncdsl.passes.pipeline import ir_text, make_context


@ad.kernel(grid=(1,), arch="sm_100a")
def gather_rows(x, idx, out, COL: ad.constexpr, SWIZZLE: ad.constexpr):
    """out = x[idx, COL:COL + n], through SMEM; the indices are loaded into SMEM first."""
    ids = ad.smem(idx.shape, idx.dtype)
    rows = ad.smem(out.shape, x.dtype)
    got_ids, got_rows = ad.barrier(), ad.barrier()
    ad.async_copy(idx, ids, barrier=got_ids)
    got_ids.wait()
    ad.async_gather(x.at[:, ad.ds(COL, out.shape[1])], rows, rows=ids, barrier=got_rows, swizzle=SWIZZLE)
    got_rows.wait()
    ad.async_copy(rows, out, swizzle=SWIZZLE)
    ad.await_async_copy(0)


@ad.kernel(grid=(1,), arch="sm_100a")
def scatter_rows(src, idx, y, COL: ad.constexpr, SWIZZLE: ad.constexpr):
    """y[idx, COL:COL + n] = src, through SMEM."""
    ids = ad.smem(idx.shape, idx.dtype)
    rows = ad.smem(src.shape, src.dtype)
    loaded = ad.barrier(num=2)
    ad.async_copy(idx, ids, barrier=loaded[0])
    ad.async_copy(src, rows, barrier=loaded[1], swizzle=SWIZZLE)
    loaded[0].wait()
    loaded[1].wait()
    ad.async_scatter(rows, y.at[:, ad.ds(COL, src.shape[1])], rows=ids, swizzle=SWIZZLE)
    ad.await_async_copy(0)


def gathered(x, idx, column, width):
    expected = np.zeros((len(idx), width), x.dtype)
    for i, row in enumerate(idx):
        if row < x.shape[0]:
            part = x[row, column : column + width]
            expected[i, : part.size] = part
    return expected


# ---------------------------------------------------------------------------------- interpreter


@pytest.mark.parametrize("dtype, index_dtype, width, swizzle", [
    (ad.float32, ad.uint32, 32, 0),
    (ad.float32, ad.uint32, 32, 128),
    (ad.bfloat16, ad.uint16, 64, 0),
    (ad.bfloat16, ad.uint16, 32, 64),
    (ad.int8, ad.uint8, 32, 32),
    (ad.float64, ad.uint32, 16, 128),
])
def test_gather_matches_numpy(dtype, index_dtype, width, swizzle):
    x = random_bits((100, 128), dtype, seed=1)
    count = 16 * 4 // index_dtype.itemsize  # a 64-byte index vector
    idx = np.random.default_rng(2).integers(0, 104, count).astype(index_dtype.numpy)  # some past the end
    idx[:3] = (7, 7, 99)  # duplicates and the last row
    out = random_bits((count, width), dtype, seed=3)
    gather_rows.interpret(x, idx, out, COL=32, SWIZZLE=swizzle)
    assert same_bytes(out, gathered(x, idx, 32, width))


def test_gather_past_the_last_column_reads_zeros():
    x = random_bits((16, 64), ad.float32, seed=4)
    idx = np.array([3, 1, 4, 1], np.uint32)
    out = np.ones((4, 32), np.float32)
    gather_rows.interpret(x, idx, out, COL=48, SWIZZLE=0)
    assert same_bytes(out, gathered(x, idx, 48, 32))


@pytest.mark.parametrize("dtype, width, swizzle",
                         [(ad.float32, 32, 0), (ad.float16, 64, 128), (ad.int8, 64, 64)])
def test_scatter_matches_numpy(dtype, width, swizzle):
    src = random_bits((8, width), dtype, seed=5)
    idx = np.array([9, 0, 31, 40, 2, 17, 5, 1000], np.uint32)  # 40 and 1000 lie past the end
    y = random_bits((32, 128), dtype, seed=6)
    expected = y.copy()
    for i, row in enumerate(idx):
        if row < 32:
            expected[row, 64 : 64 + width] = src[i]
    scatter_rows.interpret(src, idx, y, COL=64, SWIZZLE=swizzle)
    assert same_bytes(y, expected)


def test_indices_of_2_to_the_31_are_negative_rows():
    # The 32-bit coordinates are signed: a gather reads zeros there, a scatter faults.
    x = random_bits((16, 32), ad.float32, seed=7)
    idx = np.array([1, 2**31, 2**32 - 1, 3], np.uint32)
    out = np.ones((4, 32), np.float32)
    gather_rows.interpret(x, idx, out, COL=0, SWIZZLE=0)
    assert same_bytes(out, gathered(x, np.array([1, 99, 99, 3]), 0, 32))
    with pytest.raises(ad.InterpretError, match="negative coordinates fault") as caught:
        scatter_rows.interpret(out, idx, np.zeros((16, 32), np.float32), COL=0, SWIZZLE=0)
    assert "coordinate -2147483648" in str(caught.value)


@ad.kernel(grid=(1,), arch="sm_100a")
def gather_before_the_indices_land(x, idx, out):
    ids = ad.smem((4,), ad.uint32)
    rows = ad.smem((4, 32), x.dtype)
    got_ids, got_rows = ad.barrier(), ad.barrier()
    ad.async_copy(idx, ids, barrier=got_ids)
    ad.async_gather(x, rows, rows=ids, barrier=got_rows)  # no wait for the indices
    got_rows.wait()


def test_reading_indices_before_their_load_completes_is_a_race():
    with pytest.raises(ad.RaceError, match="gather4 reading its row indices") as caught:
        gather_before_the_indices_land.interpret(
            np.zeros((8, 32), np.float32), np.zeros(4, np.uint32), np.zeros((4, 32), np.float32)
        )
    assert caught.value.location.line == line_of(gather_before_the_indices_land.fn, "# no wait")


# ---------------------------------------------------------------------------------- IR and PTX

X = ad.ArraySpec((1000, 256), ad.float32)
IDX = ad.ArraySpec((8,), ad.uint32)
OUT = ad.ArraySpec((8, 64), ad.float32)
STAGES = gather_rows.stages(X, IDX, OUT, COL=64, SWIZZLE=0)


def test_resolution_splits_the_gather_into_instructions_of_four_rows():
    text = STAGES["resolve-transforms"]
    assert '"asyncdsl.async_copy_rows"' not in text
    assert re.search(r'asyncdsl.arrive_expect_tx .* bytes 2048 :', text)
    gathers = re.findall(r'"asyncdsl.tma_gather4".*first_row = (\d+) : i64', text)
    assert gathers == ["0", "4"]
    assert ("#asyncdsl.tma_desc<arg = 0, dtype = 7, elem_bytes = 4, dims = [1000, 256], "
            "strides = [1024, 4], box = [1, 64]" in text)


@pytest.mark.parametrize("stage", [stage for stage in STAGES if stage != "ptx"])
def test_every_stage_round_trips(stage):
    parsed = Parser(make_context(), STAGES[stage]).parse_module()
    parsed.verify()
    assert ir_text(parsed) == STAGES[stage]


def test_the_binary_carries_one_row_box_descriptor():
    binary = gather_rows.compile(X, IDX, OUT, COL=64, SWIZZLE=0).binary
    assert binary.arch == "sm_100a"
    assert TiledTensorMapSpec(arg_index=0, dtype_code=7, element_bytes=4, global_dims=(1000, 256),
                              global_strides=(1024, 4), box_dims=(1, 64)) in binary.descriptors


def test_gather_ptx_reads_four_indices_then_gathers(ptxas):
    ptx = STAGES["ptx"]
    assert ".version 8.6" in ptx and ".target sm_100a" in ptx
    loads = re.findall(r"@%p\d+ ld\.shared\.u32 (%r\d+), \[(%r\d+)\+(\d+)\];", ptx)
    assert [int(offset) for _, _, offset in loads] == [0, 4, 8, 12, 16, 20, 24, 28]
    gathers = re.findall(
        r"cp\.async\.bulk\.tensor\.2d\.shared::cta\.global\.tile::gather4\.mbarrier::complete_tx::bytes "
        r"\[%r\d+\], \[%rd\d+, \{64, (%r\d+), (%r\d+), (%r\d+), (%r\d+)\}\], \[%r\d+\];",
        ptx,
    )
    assert [list(g) for g in gathers] == [[r for r, _, _ in loads[:4]], [r for r, _, _ in loads[4:]]]
    assert "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r" in ptx and "], 2048;" in ptx
    ptxas(ptx, "sm_100a")


@pytest.mark.parametrize("index_dtype", [ad.uint8, ad.uint16, ad.uint32])
def test_scatter_ptx_assembles_for_every_index_width(index_dtype, ptxas):
    count = 16 // index_dtype.itemsize * 4
    ptx = scatter_rows.ptx(ad.ArraySpec((count, 32), ad.bfloat16), ad.ArraySpec((count,), index_dtype),
                           ad.ArraySpec((512, 128), ad.bfloat16), COL=32, SWIZZLE=64)
    assert f"ld.shared.u{index_dtype.bits} " in ptx
    scatters = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.tile::scatter4\.bulk_group "
                          r"\[%rd\d+, \{32, %r\d+, %r\d+, %r\d+, %r\d+\}\], \[%r\d+\];", ptx)
    assert len(scatters) == count // 4
    # One bulk group for the whole copy: committed right after the last scatter4 only.
    body = ptx[ptx.index(scatters[0]) : ptx.index(scatters[-1]) + len(scatters[-1])]
    assert "commit_group" not in body
    assert re.match(r"\s*@%p\d+ cp\.async\.bulk\.commit_group;", ptx[ptx.index(body) + len(body):])
    assert "cp.async.bulk.wait_group.read 0;" in ptx
    ptxas(ptx, "sm_100a")


def test_traced_column_assembles(ptxas):
    @ad.kernel(grid=(4,), arch="sm_100a")
    def kernel(x, idx):
        ids = ad.smem((4,), ad.uint32)
        rows = ad.smem((4, 64), x.dtype)
        bar = ad.barrier()
        ad.async_gather(x.at[:, ad.ds(ad.program_id(0) * 64, 64)], rows, rows=ids, barrier=bar)
        bar.wait()

    ptxas(kernel.ptx(ad.ArraySpec((64, 256), ad.float32), ad.ArraySpec((4,), ad.uint32)), "sm_100a")


# ---------------------------------------------------------------------------------- errors


def test_hopper_kernels_are_refused_at_the_copy():
    @ad.kernel(grid=(1,))
    def kernel(x, y):
        ids = ad.smem((4,), ad.uint32)
        rows = ad.smem((4, 32), x.dtype)
        bar = ad.barrier()
        ad.async_gather(x, rows, rows=ids, barrier=bar)  # gather
        ad.async_scatter(rows, y, rows=ids)

    spec = ad.ArraySpec((16, 32), ad.float32)
    with pytest.raises(UnsupportedTargetError) as caught:
        kernel.compile(spec, spec)
    message = str(caught.value)
    assert "tile::gather4" in message and "sm_90a (Hopper)" in message and 'arch="sm_100a"' in message
    assert caught.value.location.line == line_of(kernel.fn, "# gather")


def row_kernel(gmem_view=lambda x: x.at[:, ad.ds(0, 32)], index_shape=(8,), index_dtype=ad.uint32,
               rows_shape=(8, 32), scatter=False, **kwargs):
    @ad.kernel(grid=(1,), arch="sm_100a")
    def kernel(x):
        ids = ad.smem(index_shape, index_dtype)
        rows = ad.smem(rows_shape, x.dtype)
        bar = ad.barrier()
        if scatter:
            ad.async_scatter(rows, gmem_view(x), rows=ids, **kwargs)  # the scatter
        else:
            ad.async_gather(gmem_view(x), rows, rows=ids, barrier=bar, **kwargs)  # the gather

    return kernel


F32 = ad.ArraySpec((64, 64), ad.float32)


@pytest.mark.parametrize("array, kernel_kwargs, fragments", [
    (ad.ArraySpec((4, 64, 64), ad.float32), dict(gmem_view=lambda x: x.at[:, :, ad.ds(0, 32)]),
     ["2-D GMEM array", "rank 3"]),
    (F32, dict(index_dtype=ad.int32), ["must be unsigned", "signed i32"]),
    (F32, dict(index_dtype=ad.uint64, index_shape=(8,)), ["at most 32-bit", "64-bit"]),
    (F32, dict(index_dtype=ad.float32), ["must be unsigned integers", "f32"]),
    (F32, dict(index_shape=(2, 4)), ["1-D shared-memory buffer"]),
    (F32, dict(index_shape=(6,), rows_shape=(6, 32)), ["6 row indices", "groups of 4"]),
    (F32, dict(rows_shape=(8, 16)), ["shape (rows, columns) = (8, 32)", "(8, 16)"]),
    (ad.ArraySpec((64, 64), ad.float16), dict(gmem_view=lambda x: x.at[:, ad.ds(0, 8)], rows_shape=(8, 8)),
     ["4 rows of 16 bytes = 64 bytes", "multiple of 128"]),
    (ad.ArraySpec((64, 512), ad.int8), dict(gmem_view=lambda x: x.at[:, ad.ds(0, 288)], rows_shape=(8, 288)),
     ["1 to 256 columns, got 288"]),
    (ad.ArraySpec((64, 38), ad.float32), dict(), ["row stride 152 bytes", "multiple of 16"]),
    (F32, dict(swizzle=64), ["swizzle 64 needs each row to span exactly 64 bytes (16 columns)", "128 bytes"]),
    (F32, dict(scatter=True, rows_shape=(8, 16)), ["shape (rows, columns) = (8, 32)"]),
    (ad.ArraySpec((64, 64), ad.int4), dict(rows_shape=(8, 32)), ["sub-byte", "4-bit"]),
    (ad.ArraySpec((64, 64), ad.float32), dict(gmem_view=lambda x: x.at[:, ad.ds((1 << 31) + 32, 32)]),
     ["column start is 2147483680", "signed 32-bit coordinates"]),  # it once compiled, wrapped
])
def test_every_rule_is_a_trace_error_at_the_copy(array, kernel_kwargs, fragments):
    kernel = row_kernel(**kernel_kwargs)
    with pytest.raises(ad.TraceError) as caught:
        kernel.compile(array)
    for fragment in fragments:
        assert fragment in str(caught.value), str(caught.value)
    marker = "# the scatter" if kernel_kwargs.get("scatter") else "# the gather"
    assert caught.value.location.line == line_of(kernel.fn, marker)


@pytest.mark.parametrize("view, message", [
    (lambda x: x.at[ad.ds(0, 8), :], "dim 0 of the GMEM view must be whole"),
    (lambda x: x.at[:, 3], "window of columns"),
])
def test_gmem_views_pick_columns_only(view, message):
    kernel = row_kernel(gmem_view=view)
    with pytest.raises(ad.TraceError, match=message) as caught:
        kernel.compile(F32)
    assert caught.value.location.line == line_of(kernel.fn, "# the gather")


def test_indices_must_be_a_shared_memory_buffer():
    @ad.kernel(grid=(1,), arch="sm_100a")
    def kernel(x, idx):
        rows = ad.smem((4, 64), x.dtype)
        bar = ad.barrier()
        ad.async_gather(x, rows, rows=idx, barrier=bar)  # gmem indices

    with pytest.raises(ad.TraceError, match="row indices from an asyncdsl.smem buffer") as caught:
        kernel.compile(F32, ad.ArraySpec((4,), ad.uint32))
    assert caught.value.location.line == line_of(kernel.fn, "# gmem indices")
