"""`asyncdsl.region` and `Kernel.profile`'s compile side: what regions trace to, the PTX they
lower to, and the errors a user can cause."""

from __future__ import annotations

import re

import numpy as np
import pytest
from profile_kernels import profiled_pipelined_copy, specialized_copy
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.errors import ArgumentError, ResourceError, TraceError
from asyncdsl.hw import profile as layout
from asyncdsl.passes.pipeline import PASS_NAMES, ir_text, make_context

SPEC = ad.ArraySpec((64, 128), ad.float32)
PIPELINED = {"BM": 64, "BN": 64, "STAGES": 3, "CTAS": 4}
PIPELINED_SPEC = ad.ArraySpec((256, 256), ad.float32)


def test_regions_trace_nothing_unless_the_kernel_is_profiled():
    plain = specialized_copy.ir(SPEC, SPEC, B=32)
    profiled = specialized_copy.ir(SPEC, SPEC, B=32, profile=True)
    assert "region_begin" not in plain and "asyncdsl.profile" not in plain
    assert (re.findall(r'asyncdsl.region_begin "([^"]+)"', profiled)
            == ["wait slot", "load", "wait tile", "store"])
    assert profiled.count("asyncdsl.region_end") == 4
    assert f"asyncdsl.profile = {layout.DEFAULT_EVENTS_PER_WARPGROUP} : i64" in profiled


def test_the_unprofiled_ptx_is_unchanged_by_regions():
    ptx = specialized_copy.ptx(SPEC, SPEC, B=32)
    assert "%globaltimer" not in ptx and "%clock" not in ptx


@pytest.mark.parametrize("kernel,spec,constexprs", [
    (specialized_copy, SPEC, {"B": 32}),
    (profiled_pipelined_copy, PIPELINED_SPEC, PIPELINED),
])
def test_profiled_ptx_assembles(kernel, spec, constexprs, ptxas):
    ptxas(kernel.ptx(spec, spec, profile=True, **constexprs))


def test_profiled_ptx_stamps_each_marker_and_the_kernel_entry_and_exit():
    ptx = specialized_copy.ptx(SPEC, SPEC, B=32, profile=True)
    plain = specialized_copy.ptx(SPEC, SPEC, B=32)
    params = re.findall(r"\.param \.\S+ specialized_copy_param_\d+", ptx)
    assert len(params) == len(re.findall(r"\.param \.\S+ specialized_copy_param_\d+", plain)) + 1
    assert params[-1].startswith(".param .u64")  # the profile buffer comes last
    # One guarded vector store per marker, bounded by the capacity; entry and exit timestamps.
    stores = re.findall(r"@(%p\d+) st\.global\.v2\.u32 \[%rd\d+\], \{%r\d+, %r\d+\};", ptx)
    assert len(stores) == 8
    assert len(re.findall(rf"setp\.lt\.u32 %p\d+, %r\d+, {layout.DEFAULT_EVENTS_PER_WARPGROUP};", ptx)) == 8
    assert ptx.count("%globaltimer;") == 2 and ptx.count("%clock64;") == 2 and ptx.count("%smid;") == 1
    # The record's stride: header plus the capacity's events.
    assert ("mul.wide.u32 %rd" in ptx
            and f", {layout.record_bytes(layout.DEFAULT_EVENTS_PER_WARPGROUP)};" in ptx)
    for offset in (layout.ENTRY_TIMER, layout.ENTRY_CLOCK, layout.EXIT_TIMER, layout.EXIT_CLOCK):
        assert re.search(rf"st\.global\.u64 \[%rd\d+\+{offset}\]", ptx)
    for offset in (layout.SM_ID, layout.CTA_ID, layout.WARPGROUP, layout.EVENT_COUNT):
        assert re.search(rf"st\.global\.u32 \[%rd\d+\+{offset}\]", ptx)


def test_tags_number_the_regions_in_order_of_appearance():
    ptx = specialized_copy.ptx(SPEC, SPEC, B=32, profile=True)
    tags = [int(t) for t in re.findall(r"mov\.b32 %r\d+, (\d+);\n\s+mov\.u32 %r\d+, %clock;", ptx)]
    exit_bit = layout.EXIT_BIT
    assert tags == [0, exit_bit | 0, 1, exit_bit | 1, 2, exit_bit | 2, 3, exit_bit | 3]


def test_profile_events_sets_the_capacity(ptxas):
    @ad.kernel(profile_events=3)
    def small(x):
        with ad.region("r"):
            ad.cta_barrier()

    ptx = small.ptx(ad.ArraySpec((8,), ad.float32), profile=True)
    assert re.search(r"setp\.lt\.u32 %p\d+, %r\d+, 3;", ptx) and f", {layout.record_bytes(3)};" in ptx
    ptxas(ptx)


def test_a_region_outside_a_kernel_is_an_error():
    with pytest.raises(TraceError, match=r"asyncdsl.region can only be used inside a function decorated"):
        with ad.region("setup"):
            pass


@pytest.mark.parametrize("name", ["", 3, None])
def test_a_region_needs_a_non_empty_name(name):
    @ad.kernel
    def named(x):
        with ad.region(name):
            ad.cta_barrier()

    with pytest.raises(TraceError, match="non-empty str name") as caught:
        named.ir(ad.ArraySpec((8,), ad.float32))
    assert caught.value.location.file == __file__


def test_a_region_must_end_in_the_block_it_began():
    @ad.kernel
    def tangled(x):
        loop = iter(ad.range(4))
        with ad.region("straddles"):
            next(loop)  # enters the loop's body, which the region cannot close from inside
        for _ in loop:
            pass

    with pytest.raises(TraceError, match="began in one block and ends in another"):
        tangled.ir(ad.ArraySpec((8,), ad.float32))


@pytest.mark.parametrize("events", [0, -1, 2**40, 1.5, True])
def test_profile_events_is_checked(events):
    with pytest.raises(ArgumentError, match="profile_events"):
        ad.kernel(lambda x: None, profile_events=events)


def test_a_full_profile_buffer_is_an_error_naming_the_capacity_needed():
    @ad.kernel(profile_events=5)
    def busy(x):
        for _ in ad.range(4):
            with ad.region("step"):
                ad.cta_barrier()

    with pytest.raises(ResourceError,
                       match=r"reached 8 region events .* more than the 5 .* profile_events=8") as caught:
        busy.interpret_profile(np.zeros(8, np.float32))
    assert caught.value.location.file == __file__


def test_profiled_and_plain_kernels_are_separate_specialisations():
    compiled = specialized_copy.compile(SPEC, SPEC, B=32, profile=True)
    plain = specialized_copy.compile(SPEC, SPEC, B=32)
    assert compiled is not plain
    assert type(compiled.binary.params[-1]).__name__ == "ProfileBufferParam"
    assert compiled.binary.params[-1].region_names == ("wait slot", "load", "wait tile", "store")


@pytest.mark.parametrize("stage", ["trace", *PASS_NAMES])
def test_profiled_ir_round_trips(stage):
    text = specialized_copy.stages(SPEC, SPEC, B=32, profile=True)[stage]
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    assert ir_text(parsed) == text
    # The markers survive every asyncdsl-level pass; lower-to-ptx turns them into stamps.
    assert text.count("asyncdsl.region_begin") == (0 if stage == "lower-to-ptx" else 4)
