"""All-gather and reduce-scatter (`asyncdsl.kernels.collectives`) on 2 and 4 emulated devices in
the interpreter, bit for bit, over two calls of a job (epochs 1 and 2): the host functions with
the configuration they pick, and the kernels with small tiles and rings that refill."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.jit.specs import ScalarSpec
from asyncdsl.kernels.collectives import all_gather_kernel, reduce_scatter_kernel

SMALL = {"CTAS": 3, "BM": 32, "BN": 32, "STAGES": 2}  # several tiles a CTA: the rings refill


def _flags(devices: int) -> list[np.ndarray]:
    return [np.zeros(devices, np.int32) for _ in range(devices)]


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
def test_all_gather_stacks_every_shard_on_every_device(devices, dtype):
    rng = np.random.default_rng(devices)
    flags = _flags(devices)
    for epoch in (1, 2):
        shards = [rng.standard_normal((100, 72)).astype(dtype) for _ in range(devices)]
        outs = [np.full((devices, 100, 72), np.nan, dtype) for _ in range(devices)]
        all_gather_kernel.interpret(shards, outs, flags, epoch, **SMALL, devices=devices)
        assert all(out.tobytes() == np.stack(shards).tobytes() for out in outs)
    assert all((f == 2 * SMALL["CTAS"]).all() for f in flags)


def _reduced(xs: list[np.ndarray], rank: int) -> np.ndarray:
    """Device `rank`'s output: the float32 sum over devices in rank order, rounded once."""
    total = xs[0][rank].astype(np.float32)
    for x in xs[1:]:
        total = total + x[rank].astype(np.float32)
    return total.astype(xs[0].dtype)


@pytest.mark.parametrize("devices", [2, 4])
def test_reduce_scatter_sums_each_chunk_in_rank_order_rounded_once(devices):
    rng = np.random.default_rng(devices)
    ready = _flags(devices)
    for epoch in (1, 2):
        xs = [rng.standard_normal((devices, 40, 72)).astype(ml_dtypes.bfloat16) for _ in range(devices)]
        outs = [np.full((40, 72), np.nan, ml_dtypes.bfloat16) for _ in range(devices)]
        reduce_scatter_kernel.interpret(xs, outs, ready, epoch, CTAS=3, devices=devices)
        assert all(out.tobytes() == _reduced(xs, rank).tobytes() for rank, out in enumerate(outs))
    assert all((r == 2).all() for r in ready)


def test_the_host_functions_make_their_outputs_with_the_configuration_they_pick():
    devices, rng = 2, np.random.default_rng(0)
    shards = [rng.standard_normal((40, 136)).astype(ml_dtypes.bfloat16) for _ in range(devices)]
    gathered = K.all_gather(shards, _flags(devices), 1)
    assert all(out.tobytes() == np.stack(shards).tobytes() for out in gathered)
    xs = [rng.standard_normal((devices, 40, 136)).astype(np.float32) for _ in range(devices)]
    reduced = K.reduce_scatter(xs, _flags(devices), 1)
    assert all(out.tobytes() == _reduced(xs, rank).tobytes() for rank, out in enumerate(reduced))


def test_on_one_device_a_collective_is_a_copy():
    shard = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    out = K.all_gather(shard, np.zeros(1, np.int32), 1)
    assert out.shape == (1, 64, 64) and np.array_equal(out[0], shard)


def test_per_device_arguments_are_checked():
    with pytest.raises(ad.ArgumentError, match="list of 2 arrays"):
        all_gather_kernel.interpret(np.zeros((8, 16), np.float32), [], [], 1, devices=2)
    shards = [np.zeros((8, 16), np.float32), np.zeros((8, 32), np.float32)]
    outs = [np.zeros((2, 8, 16), np.float32)] * 2
    with pytest.raises(ad.ArgumentError, match="device 1 differ"):
        all_gather_kernel.interpret(shards, outs, _flags(2), 1, devices=2)


def test_outputs_of_the_wrong_shape_are_trace_errors():
    shards = [np.zeros((8, 16), np.float32)] * 2
    with pytest.raises(ad.TraceError, match=r"takes out of shape \(2, 8, 16\)"):
        all_gather_kernel.interpret(shards, [np.zeros((16, 16), np.float32)] * 2, _flags(2), 1, devices=2)
    with pytest.raises(ad.TraceError, match=r"takes x of shape \(2, 8, 16\)"):
        reduce_scatter_kernel.interpret([np.zeros((16, 16), np.float32)] * 2,
                                        [np.zeros((8, 16), np.float32)] * 2, _flags(2), 1, devices=2)


def test_an_epoch_the_flags_are_not_at_is_refused():
    # A repeated epoch (or another ctas) would let the waits pass before the peers deliver: on a
    # GPU the output holds what was there before, though the interpreter's schedule hides it.
    shards = [np.ones((8, 64), np.float32), np.zeros((8, 64), np.float32)]
    flags = _flags(2)
    assert np.array_equal(K.all_gather(shards, flags, 1, ctas=2)[1], np.stack(shards))
    assert all((f == 2).all() for f in flags)
    with pytest.raises(ad.ArgumentError, match=r"epoch 1: device 0's flags hold \[2, 2\], not 0 \(zero"):
        K.all_gather(shards, flags, 1, ctas=2)
    with pytest.raises(ad.ArgumentError, match=r"flags hold \[2, 2\], not 3 \(as call 1 leaves"):
        K.all_gather(shards, flags, 2, ctas=3)
    assert np.array_equal(K.all_gather(shards, flags, 2, ctas=2)[0], np.stack(shards))
    ready = _flags(2)
    K.reduce_scatter([np.ones((2, 8, 64), np.float32)] * 2, ready, 1)
    with pytest.raises(ad.ArgumentError, match=r"reduce_scatter, epoch 1: .* not 0 \("):
        K.reduce_scatter([np.ones((2, 8, 64), np.float32)] * 2, ready, 1)
    for epoch in (0, -1, 1.0):
        with pytest.raises(ad.ArgumentError, match="epoch must be a positive int"):
            K.all_gather(shards, _flags(2), epoch)


def test_a_count_of_ctas_that_cannot_all_run_at_once_is_refused(monkeypatch):
    # Every all-gather CTA waits for all the others: more than one a multiprocessor would hang.
    from runtime_fakes import device_facts_of
    from support import device_array

    from asyncdsl.runtime import driver

    monkeypatch.setattr(driver, "_facts", {0: device_facts_of(9, 0)})
    shard, out = device_array((128, 128), 0x10000), device_array((1, 128, 128), 0x30000)
    refusal = r"at most one CTA a multiprocessor \(132 here\), got ctas=133"
    with pytest.raises(ad.ArgumentError, match=refusal):
        K.all_gather(shard, device_array((1,), 0x20000, ad.int32), 1, out=out, ctas=133)
    for ctas in (0, 2.0, True):
        with pytest.raises(ad.ArgumentError, match="ctas must be a positive int") as caught:
            K.all_gather(np.zeros((8, 64), np.float32), _flags(1)[0], 1, ctas=ctas)
        assert caught.value.location.file == __file__


@pytest.mark.parametrize("dtype", [np.int32, np.int16])
def test_a_reduce_scatter_of_integers_is_refused_rather_than_rounded(dtype):
    # Summed in float32, int32 values past 2**24 would come back rounded: 16777217 + 0 -> 16777216.
    xs = [np.full((2, 8, 64), 2**24 + 1 if dtype is np.int32 else 1, dtype), np.zeros((2, 8, 64), dtype)]
    with pytest.raises(ad.TraceError, match=f"floating-point arrays in float32; x holds {np.dtype(dtype)}"):
        K.reduce_scatter(xs, _flags(2), 1)
    with pytest.raises(ad.TraceError, match="out holds int32"):
        K.reduce_scatter([x.astype(np.float32) for x in xs], _flags(2), 1,
                         out=[np.zeros((8, 64), np.int32) for _ in range(2)])


@pytest.mark.parametrize("devices", [1, 2, 8])
def test_the_configurations_the_host_functions_pick_assemble(devices, ptxas):
    """bf16 on an H200 (132 SMs), as `benchmarks/collectives.py` runs them."""
    rows, bf16, flags, epoch = 1024, ad.bfloat16, ad.ArraySpec((devices,), ad.int32), ScalarSpec("int")
    config = {"CTAS": 132, "BN": 128}
    shard, gathered = ad.ArraySpec((rows, 4096), bf16), ad.ArraySpec((devices, rows, 4096), bf16)
    ptxas(all_gather_kernel.specialize((shard, gathered, flags, epoch), {**config, "BM": 128, "STAGES": 4},
                                       devices=devices).ptx)
    ptxas(reduce_scatter_kernel.specialize((gathered, shard, flags, epoch), {**config, "BM": 32, "STAGES": 2},
                                           devices=devices).ptx)
