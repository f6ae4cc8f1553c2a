"""The IR prints and parses back unchanged at every stage of the pipeline."""

from __future__ import annotations

import pytest
from xdsl.parser import Parser

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


@pytest.mark.parametrize("stage", ["trace", *PASS_NAMES])
def test_every_stage_round_trips(stage):
    text = STAGES[stage]
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    assert ir_text(parsed) == text


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


def test_barrier_type_prints_its_count():
    assert str(BarriersType(4)) == "!asyncdsl.barriers<4>"


def test_the_pipeline_kernel_also_runs():
    import numpy as np

    x = np.random.default_rng(3).standard_normal((256, 192)).astype(np.float32)
    y = np.zeros_like(x)
    everything.interpret(x, y, B=32)
    assert np.array_equal(y[:128], x[:128]) and not y[128:].any()
