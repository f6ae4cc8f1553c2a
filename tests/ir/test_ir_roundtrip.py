"""The IR prints and parses back unchanged at every stage of the pipeline."""

from __future__ import annotations

import re

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

import asyncdsl as ad
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.memory_attrs import BarriersType
from asyncdsl.kernel_binary import TiledTensorMapSpec
from asyncdsl.passes.pipeline import PASS_NAMES, ir_text, make_context

F32 = ad.ArraySpec((256, 192), ad.float32)


@ad.kernel(grid=(4, 6), block=256, cluster=(2, 1, 1))
def everything(x, y, B: ad.constexpr):
    wg = ad.warpgroup_idx()
    bufs = ad.smem((2, B, B), x.dtype)
    full = ad.barrier(arrival_count=1, num=2)
    empty = ad.barrier(arrival_count=1, num=2)
    row = ad.program_id(0) * B
    with ad.when(wg == 1):  # both slots start empty: the producer's first waits must pass
        empty[0].arrive()
        empty[1].arrive()
    for k in ad.range(ad.num_programs(1)):
        slot = k % 2
        with ad.when(wg == 0):
            empty[slot].wait()
            ad.async_copy(x.at[ad.ds(row, B), ad.ds(k * B, B)], bufs.at[slot], barrier=full[slot])
        with ad.when(wg == 1):
            full[slot].wait()
            ad.async_copy(bufs.at[slot], y.at[ad.ds(row, B), ad.ds(k * B, B)])
            ad.await_async_copy(0, read_only=True)
            empty[slot].arrive()
    ad.cluster_barrier()


STAGES = everything.stages(F32, F32, B=32)


def assert_round_trips(text: str) -> None:
    """`text` parses, verifies and prints back unchanged."""
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    assert ir_text(parsed) == text


@pytest.mark.parametrize("stage", ["trace", *PASS_NAMES])
def test_every_stage_round_trips(stage):
    text = STAGES[stage]
    assert_round_trips(text)


def test_source_locations_survive_the_round_trip():
    text = STAGES["resolve-transforms"]
    assert f'loc("{__file__}":' in text
    parsed = Parser(make_context(), text).parse_module()
    assert f'loc("{__file__}":' in ir_text(parsed)


def test_descriptor_attribute_round_trips_every_field():
    spec = TiledTensorMapSpec(
        arg_index=3, dtype_code=9, element_bytes=2, global_dims=(7, 1024, 64),
        global_strides=(131072, 128, 2), box_dims=(1, 64, 64), element_strides=(1, 1, 1),
        swizzle_bytes=128, oob_nan=True, l2_promotion_bytes=256, base_offset_bytes=4096,
    )
    attr = TmaDescriptorAttr.from_spec(spec)
    assert attr.spec() == spec
    text = str(attr)
    assert "swizzle = 128" in text and "dims = [7, 1024, 64]" in text
    assert Parser(make_context(), text).parse_attribute() == attr
    assert "peer" not in text  # the argument's own memory: the default is not printed


def test_peer_descriptor_attribute_round_trips():
    spec = TiledTensorMapSpec(0, 7, 4, (64, 64), (256, 4), (64, 64), peer=3)
    attr = TmaDescriptorAttr.from_spec(spec)
    assert str(attr).endswith("offset = 0, peer = 3>")
    assert Parser(make_context(), str(attr)).parse_attribute() == attr
    assert attr.spec() == spec


def test_barrier_type_prints_its_count():
    assert str(BarriersType(4)) == "!asyncdsl.barriers<4>"


def test_the_pipeline_kernel_also_runs():
    import numpy as np

    x = np.random.default_rng(3).standard_normal((256, 192)).astype(np.float32)
    y = np.zeros_like(x)
    everything.interpret(x, y, B=32)
    assert np.array_equal(y[:128], x[:128]) and not y[128:].any()


# -- register tiles: every tile op, through every stage ---------------------------------------------


@ad.kernel(grid=(1,))
def tile_everything(x, y, z):
    buf = ad.smem((64, 128), ad.bfloat16)
    out = ad.smem((64, 128), ad.float32)
    small = ad.smem((64, 128), ad.float8_e4m3fn)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :], buf, barrier=bar)
    bar.wait()
    total = ad.registers((64, 128), ad.float32, layout=ad.WGMMA)
    t = buf.load(layout=ad.WGMMA).astype(ad.float32)
    total[...] = ad.zeros((64, 128), ad.float32)
    for _ in ad.range(2):
        total[...] = ad.fma(total[...], t, ad.full((64, 128), ad.program_id(0), ad.float32))
    s = total[...]
    m = ad.where(s > 0.5, ad.exp2(s, approx=True), -abs(s)) + ad.sqrt(abs(s))
    k = ad.iota((64, 128), ad.int32, dim=1)
    bits = ((k // 3 + k % 5) << 2 >> 1) ^ ~k  # integer division, modulo, shifts, ~
    gathered = ad.load(z.at[k % 64, (k * 7) % 128], mask=k < 100, other=1.0).astype(ad.float32)  # a gather
    r = m.sum(axis=1)[:, None] + bits.astype(ad.float32) + gathered
    out[...] = ad.maximum(r, m).to_layout(ad.strided(4)) / 3.0
    small[...] = out[...].astype(ad.float8_e4m3fn)
    ad.store(y.at[ad.iota((64, 128), ad.int32, dim=0), 127 - k], gathered, mask=k < 64)  # a scatter
    ad.fence_async_smem()
    ad.async_copy(out, y.at[:, :])
    ad.async_copy(small, z.at[:, :])
    ad.await_async_copy(0)


TILE_STAGES = tile_everything.stages(
    ad.ArraySpec((64, 128), ad.bfloat16), ad.ArraySpec((64, 128), ad.float32),
    ad.ArraySpec((64, 128), ad.float8_e4m3fn)
)


@pytest.mark.parametrize("stage", ["trace", *PASS_NAMES])
def test_every_tile_op_round_trips(stage):
    text = TILE_STAGES[stage]
    assert_round_trips(text)


def test_tile_ops_print_readably():
    text = TILE_STAGES["infer-layouts"]
    for fragment in ("asyncdsl.load_smem", "layout <wgmma>", "asyncdsl.reduce sum",
                     "asyncdsl.compare gt", "asyncdsl.select", "asyncdsl.convert", "asyncdsl.iota dim 1",
                     "asyncdsl.alloc_registers", "!asyncdsl.registers<vector<64x128xf32>>",
                     "asyncdsl.relayout", "math.exp2", "fastmath<afn>", "math.sqrt",
                     "asyncdsl.layout = #asyncdsl.layout<wgmma_row>"):
        assert fragment in text, fragment


@ad.kernel(grid=(1,))
def laid_out(x, y):
    ring = ad.smem((2, 64, 128), ad.bfloat16, transforms=ad.TileTransform((8, 64)), swizzle=128)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :], ring.at[1], barrier=bar)
    bar.wait()
    ring.at[0][...] = ring.at[1].load(layout=ad.WGMMA)
    ad.fence_async_smem()
    ad.async_copy(ring.at[0], y.at[:, :])
    ad.await_async_copy(0)


LAID_OUT_STAGES = laid_out.stages(ad.ArraySpec((64, 128), ad.bfloat16), ad.ArraySpec((64, 128), ad.bfloat16))


@pytest.mark.parametrize("stage", ["trace", *PASS_NAMES])
def test_buffers_carrying_their_layout_round_trip(stage):
    text = LAID_OUT_STAGES[stage]
    assert_round_trips(text)


def test_a_buffer_layout_prints_in_its_memory_space():
    text = LAID_OUT_STAGES["trace"]
    layout = "#asyncdsl.smem<[2, 64, 128], [#asyncdsl.tile<[8, 64]>], swizzle = 128>"
    assert f"memref<2x8x2x8x64xbf16, {layout}>" in text
    view = "#asyncdsl.smem<[64, 128], [#asyncdsl.tile<[8, 64]>], swizzle = 128>"
    assert f"memref<8x2x8x64xbf16, {view}>" in text
    assert "align 1024" in text  # the swizzle's repeat


@pytest.mark.parametrize("text,message", [
    ('"asyncdsl.alloc_smem"() <{alignment = 1024 : i64}> : () -> memref<64x128xbf16, '
     '#asyncdsl.smem<[64, 128], [#asyncdsl.tile<[8, 64]>], swizzle = 128>>',
     "has the physical shape (8, 2, 8, 64)"),
    ('"asyncdsl.alloc_smem"() <{alignment = 128 : i64}> : () -> memref<8x2x8x64xbf16, '
     '#asyncdsl.smem<[64, 128], [#asyncdsl.tile<[8, 64]>], swizzle = 128>>', "aligned to 1024"),
    ('"asyncdsl.alloc_smem"() <{alignment = 1024 : i64}> : () -> memref<8x4x8x32xbf16, '
     '#asyncdsl.smem<[64, 128], [#asyncdsl.tile<[8, 32]>], swizzle = 128>>', "rows of exactly 128 bytes"),
])
def test_alloc_smem_verifies_the_layout_against_its_shape(text, message):
    op = Parser(make_context(), text).parse_operation()
    with pytest.raises(VerifyException, match=re.escape(message)):
        op.verify()


def test_the_printed_trace_run_through_the_pass_list_prints_the_kernels_ptx():
    """The pipeline as xDSL module passes (`default_pipeline`, `LowerToPtx` in place), run on the
    traced IR parsed back from its text, gives the PTX `compile_module` gives (which lowers into
    a module of its own)."""
    from asyncdsl.dialects.ptx import print_ptx
    from asyncdsl.passes.pipeline import default_pipeline

    expected = everything.ptx(F32, F32, B=32)
    major, minor = re.search(r"^\.version (\d+)\.(\d+)$", expected, re.MULTILINE).groups()
    ctx = make_context()
    module = Parser(ctx, STAGES["trace"]).parse_module()
    for compiler_pass in default_pipeline():
        compiler_pass.apply(ctx, module)
    assert print_ptx(module, version=(int(major), int(minor)), target="sm_90a") == expected


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def between_ctas(x, y):
    box = ad.smem((64, 64), ad.float32, transforms=ad.TileTransform((64, 32)), swizzle=128)
    landed = ad.barrier(arrival_count=2)
    peer = 1 - ad.cluster_cta_id(0)
    box.peer(peer)[...] = ad.load(x.at[:, :], layout=ad.WGMMA)
    landed.arrive(collective="x")
    landed.wait()
    ad.store(y.at[:, :], box[...] + box.peer(peer).load(layout=ad.WGMMA))


PEER_STAGES = between_ctas.stages(ad.ArraySpec((64, 64), ad.float32), ad.ArraySpec((64, 64), ad.float32))


@pytest.mark.parametrize("stage", ["trace", *PASS_NAMES])
def test_peer_shared_memory_accesses_round_trip(stage):
    text = PEER_STAGES[stage]
    assert_round_trips(text)
    if stage != "lower-to-ptx":  # the last stage holds PTX instead
        assert re.search(r"asyncdsl.store_smem %\S+, %\S+ in cta %\S+", text)
        assert re.search(r"asyncdsl.load_smem %\S+ in cta %\S+", text)
