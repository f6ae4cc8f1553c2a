"""L2 prefetch: the IR (sharing the descriptor of a load of the same slice), the PTX assembled by
ptxas, the interpreter (checks, moves nothing), and errors at the user's line."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support import line_of
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.interpret.grid import run_kernel
from asyncdsl.interpret.memory import GlobalArgument
from asyncdsl.passes.pipeline import ir_text, make_context

B = 64
F32 = ad.ArraySpec((256, 128), ad.float32)


@ad.kernel(grid=lambda x, y: (x.shape[0] // B,))
def prefetch_then_copy(x, y):
    """Prefetch the CTA's rows into L2 (CTAs 0 and 1 only), then copy them through SMEM."""
    i = ad.program_id(0)
    rows = x.at[ad.ds(i * B, B), :]
    ad.async_prefetch(rows, predicate=i < 2)
    tile = ad.smem((B, x.shape[1]), x.dtype)
    bar = ad.barrier()
    ad.async_copy(rows, tile, barrier=bar)
    bar.wait()
    ad.async_copy(tile, y.at[ad.ds(i * B, B), :])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def prefetch_only(x, T: ad.constexpr, SWIZZLE: ad.constexpr, INDEX: ad.constexpr):
    """One prefetch of x.at[INDEX] through transforms T with swizzle SWIZZLE."""
    ad.async_prefetch(x.at[INDEX], transforms=T, swizzle=SWIZZLE)  # the prefetch


def test_the_prefetch_becomes_one_tma_prefetch_sharing_the_loads_descriptor():
    stages = prefetch_then_copy.stages(F32, F32)
    assert '"asyncdsl.async_prefetch"' in stages["trace"]
    numbered = stages["allocate-descriptor-scratch"]
    prefetch = next(line for line in numbered.splitlines() if '"asyncdsl.tma_prefetch"' in line)
    load = next(line for line in numbered.splitlines() if '"asyncdsl.tma_load"' in line)
    assert "box = [64, 128]" in prefetch and "descriptor_index = 0" in prefetch
    assert "descriptor_index = 0" in load
    assert len(prefetch_then_copy.compile(F32, F32).binary.descriptors) == 2  # x's (shared) and y's


def test_the_ir_with_prefetches_round_trips():
    stages = prefetch_then_copy.stages(F32, F32)
    for stage in ("trace", "resolve-transforms", "allocate-descriptor-scratch"):
        parsed = Parser(make_context(), stages[stage]).parse_module()
        parsed.verify()
        assert ir_text(parsed) == stages[stage]


def test_ptx_prefetches_by_the_leader_where_the_predicate_holds(ptxas):
    ptx = prefetch_then_copy.ptx(F32, F32)
    match = re.search(
        r"@(%p\d+) cp\.async\.bulk\.prefetch\.tensor\.2d\.L2\.global\.tile \[%rd\d+, \{0, %r\d+\}\];", ptx
    )
    assert match, ptx
    assert re.search(rf"and\.pred {match.group(1)}, %p\d+, %p\d+;", ptx)  # leader and predicate
    ptxas(ptx)


@pytest.mark.parametrize(
    "shape, index, transforms, swizzle, rank",
    [
        ((512,), (ad.ds(128, 256),), (), None, 1),
        ((4, 64, 128), (1, ad.ds(0, 64), ad.ds(0, 32)), (ad.TileTransform((8, 32)),), 128, 5),
        ((2, 3, 4, 64, 64), (Ellipsis,), (), None, 5),
        ((8, 64, 128), (ad.ds(0, 8), ad.ds(0, 16), ad.ds(0, 128)),
         (ad.TransposeTransform((1, 0, 2)),), None, 3),
    ],
)
def test_prefetches_of_every_rank_assemble(shape, index, transforms, swizzle, rank, ptxas):
    ptx = prefetch_only.ptx(ad.ArraySpec(shape, ad.float32), T=transforms, SWIZZLE=swizzle, INDEX=index)
    assert f"cp.async.bulk.prefetch.tensor.{rank}d.L2.global.tile" in ptx
    ptxas(ptx)


def test_the_interpreter_runs_prefetches_and_moves_nothing_by_them():
    x = np.random.default_rng(0).standard_normal((256, 128)).astype(np.float32)
    y = np.zeros_like(x)
    prefetch_then_copy.interpret(x, y)
    assert np.array_equal(x, y)
    before = x.copy()
    prefetch_only.interpret(x, T=(), SWIZZLE=None, INDEX=(ad.ds(64, 64), ad.ds(0, 128)))
    assert x.tobytes() == before.tobytes()


def test_a_prefetch_past_the_edges_is_legal():
    x = np.zeros((100, 32), np.float32)
    prefetch_only.interpret(x, T=(), SWIZZLE=None, INDEX=(ad.ds(96, 64), ad.ds(0, 32)))


def test_the_interpreter_checks_the_descriptor_fits_its_argument():
    compiled = prefetch_then_copy.compile(F32, F32)
    small = np.zeros((128, 128), np.float32)  # half of what the kernel was compiled for
    with pytest.raises(ad.InterpretError,
                       match="the TMA prefetch's descriptor views bytes up to 131072") as caught:
        run_kernel(compiled.module,
                   [GlobalArgument("x", small), GlobalArgument("y", small.copy())], (1, 1, 1))
    assert caught.value.location.line == line_of(prefetch_then_copy.fn, "ad.async_prefetch")


def test_a_box_tma_cannot_move_is_a_copy_error_at_the_prefetch():
    with pytest.raises(ad.CopyError, match=r"TMA box dimension 300 > 256") as caught:
        prefetch_only.compile(ad.ArraySpec((512, 16), ad.float32), T=(), SWIZZLE=None,
                              INDEX=(ad.ds(0, 300), ad.ds(0, 16)))
    assert caught.value.location.line == line_of(prefetch_only.fn, "# the prefetch")


def test_swizzle_rules_apply_to_prefetches():
    with pytest.raises(ad.CopyError, match="swizzle 128 needs the minor box dim to span exactly 128 bytes"):
        prefetch_only.compile(ad.ArraySpec((64, 64), ad.float32), T=(), SWIZZLE=128, INDEX=(Ellipsis,))


def test_only_gmem_arrays_are_prefetched():
    @ad.kernel
    def kernel(x):
        buf = ad.smem((8, 8), x.dtype)
        ad.async_prefetch(buf)  # smem

    with pytest.raises(ad.TraceError, match="async_prefetch takes a kernel array argument") as caught:
        kernel.compile(F32)
    assert caught.value.location.line == line_of(kernel.fn, "# smem")


def test_a_prefetch_predicate_must_be_a_condition():
    @ad.kernel
    def kernel(x):
        ad.async_prefetch(x, predicate=ad.program_id(0))  # an index

    with pytest.raises(ad.TraceError, match="predicate must be a traced condition"):
        kernel.compile(F32)
