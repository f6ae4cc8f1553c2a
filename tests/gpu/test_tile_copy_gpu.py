"""The tile-copy example on the H200: bit-exact for ragged shapes, every dtype, grids from 1 to
65536 CTAs; through torch tensors and asyncdsl's own device arrays; a second call hits the
caches; and the interpreter produces the same bytes from the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import hopper_or_skip
from support import random_bits

import asyncdsl as ad
from asyncdsl.examples.tile_copy import CASES, tile_copy
from asyncdsl.runtime import clear_loaded_kernels, load_kernel, to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

RNG = np.random.default_rng(2026)


def poisoned_like(src: np.ndarray) -> np.ndarray:
    out = np.empty_like(src)
    out.view(np.uint8)[...] = 0xA5
    return out


def run_gpu(src: np.ndarray, out: np.ndarray, **constexprs) -> np.ndarray:
    src_d, out_d = to_device(src), to_device(out)
    tile_copy(src_d, out_d, **constexprs)
    return to_host(out_d)


@pytest.mark.parametrize("dtype,bm,bn", CASES, ids=[c[0].name for c in CASES])
@pytest.mark.parametrize("shape", [(1000, 528), (64, 64), (7, 16), (333, 4096)])
def test_bit_exact_every_dtype_and_ragged_shapes(dtype, bm, bn, shape):
    if shape[1] * dtype.itemsize % 16:
        pytest.skip("rows must be a multiple of 16 bytes for TMA")
    src = random_bits(shape, dtype, RNG)
    got = run_gpu(src, poisoned_like(src), BM=bm, BN=bn)
    assert got.view(np.uint8).tobytes() == src.view(np.uint8).tobytes()


@pytest.mark.parametrize("grid_ctas,shape,tile", [
    (1, (64, 64), (64, 64)),
    (4, (128, 128), (64, 64)),
    (1024, (4096, 4096), (128, 128)),
    (65536, (4096, 4096), (16, 16)),
])
def test_grids_from_one_to_65536_ctas(grid_ctas, shape, tile):
    src = torch.randn(shape, device="cuda", dtype=torch.float32)
    out = torch.full_like(src, float("nan"))
    tile_copy(src, out, BM=tile[0], BN=tile[1])
    assert (shape[0] // tile[0]) * (shape[1] // tile[1]) == grid_ctas
    torch.cuda.synchronize()
    assert torch.equal(out, src)


def test_torch_bfloat16_tensors():
    src = torch.randn((300, 200), device="cuda").to(torch.bfloat16)
    out = torch.zeros_like(src)
    tile_copy(src, out, BM=64, BN=64)
    torch.cuda.synchronize()
    assert torch.equal(out, src)


def test_second_call_hits_the_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path))
    src = torch.randn((256, 256), device="cuda")
    out = torch.zeros_like(src)
    tile_copy(src, out, BM=32, BN=32)  # this specialization is new to the process
    compiled = tile_copy.compile(src, out, BM=32, BN=32)
    first = load_kernel(compiled.binary)
    assert first.cubin_source == "compiled"
    specializations = len(tile_copy.specializations.compiled)
    clear_loaded_kernels()  # a fresh process would start here: only the disk cache remains
    out.zero_()
    tile_copy(src, out, BM=32, BN=32)
    torch.cuda.synchronize()
    assert torch.equal(out, src)
    assert len(tile_copy.specializations.compiled) == specializations
    assert load_kernel(compiled.binary).cubin_source == "disk"


def test_interpreter_and_gpu_agree_byte_for_byte():
    for dtype, bm, bn in CASES:
        src = random_bits((200, 272), dtype, RNG)
        interpreted = poisoned_like(src)
        tile_copy.interpret(src, interpreted, BM=bm, BN=bn)
        on_gpu = run_gpu(src, poisoned_like(src), BM=bm, BN=bn)
        assert interpreted.view(np.uint8).tobytes() == on_gpu.view(np.uint8).tobytes(), dtype


def test_interpret_env_runs_ordinary_calls_on_device_arrays(monkeypatch):
    src = random_bits((200, 272), ad.bfloat16, RNG)
    own_src, own_out = to_device(src), to_device(poisoned_like(src))
    torch_src = torch.from_numpy(src.view(np.int16)).cuda().view(torch.bfloat16)
    torch_out = torch.zeros_like(torch_src)
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")
    tile_copy(own_src, own_out, BM=64, BN=128)
    tile_copy(torch_src, torch_out, BM=64, BN=128)
    assert to_host(own_out).view(np.uint8).tobytes() == src.view(np.uint8).tobytes()
    assert torch.equal(torch_out.view(torch.int16).cpu(), torch.from_numpy(src.view(np.int16)))
