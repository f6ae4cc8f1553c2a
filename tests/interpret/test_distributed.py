"""Kernels on several emulated devices: peer copies, signals and their waits, deadlocks."""

from __future__ import annotations

import numpy as np
import pytest

import asyncdsl as ad


def test_device_id_and_num_devices():
    @ad.kernel(grid=(1,))
    def ranks(out):
        assert ad.num_devices() == 3
        buf = ad.smem((1, 16), ad.int32)
        done = ad.barrier()
        ad.async_copy(out.at[ad.ds(ad.device_id(), 1), :], buf, barrier=done)
        done.wait()
        ad.async_copy(buf, out.peer((ad.device_id() + 1) % 3).at[ad.ds(ad.device_id(), 1), :])
        ad.await_async_copy()

    outs = [np.full((3, 16), device + 10, np.int32) for device in range(3)]
    ranks.interpret(outs, devices=3)
    # Device d's row d went to device d + 1 (mod 3); the other rows kept their values.
    for device, out in enumerate(outs):
        source = (device - 1) % 3
        expected = np.full((3, 16), device + 10, np.int32)
        expected[source] = source + 10
        np.testing.assert_array_equal(out, expected)


def test_tma_reduction_into_a_peer_adds_every_device():
    @ad.kernel(grid=(1,))
    def reduce_to_zero(x, total):
        buf = ad.smem(x.shape, x.dtype)
        done = ad.barrier()
        ad.async_copy(x, buf, barrier=done)
        done.wait()
        ad.async_copy(buf, total.peer(0), reduction="add")
        ad.await_async_copy()

    xs = [np.arange(64, dtype=np.float32).reshape(4, 16) * (d + 1) for d in range(4)]
    totals = [np.zeros((4, 16), np.float32) for _ in range(4)]
    reduce_to_zero.interpret(xs, totals, devices=4)
    np.testing.assert_array_equal(totals[0], sum(xs))
    assert not totals[1].any()


def test_signals_add_and_waits_interleave_devices():
    @ad.kernel(grid=(1,))
    def count(flags):
        # Everyone adds one to device 0's counter; device 0 waits for all of them.
        ad.signal(flags.peer(0).at[0], 1, op="add")
        with ad.when(ad.device_id() == 0):
            ad.wait_signal(flags.at[0], "eq", ad.num_devices())
            ad.signal(flags.at[1], 9)

    flags = [np.zeros(2, np.uint32) for _ in range(4)]
    count.interpret(flags, devices=4)
    assert flags[0].tolist() == [4, 9]
    assert all(not f.any() for f in flags[1:])


def test_a_wait_no_device_satisfies_is_a_deadlock_naming_both_devices():
    @ad.kernel(grid=(1,))
    def waits_forever(flags):
        with ad.when(ad.device_id() == 0):
            ad.wait_signal(flags.at[1], "ge", 1)

    flags = [np.zeros(2, np.int32) for _ in range(2)]
    with pytest.raises(ad.DeadlockError) as caught:
        waits_forever.interpret(flags, devices=2)
    message = str(caught.value)
    assert "device 0 CTA (0, 0, 0) warpgroup 0" in message
    assert "flags[1] on device 0 to be at least 1 (it holds 0)" in message
    assert "device(s) 1 have exited" in message


def test_signal_before_awaiting_stores_is_an_error():
    @ad.kernel(grid=(1,))
    def early(x, flags):
        buf = ad.smem(x.shape, x.dtype)
        done = ad.barrier()
        ad.async_copy(x, buf, barrier=done)
        done.wait()
        ad.async_copy(buf, x.peer(1 - ad.device_id()))
        ad.await_async_copy(read_only=True)
        ad.signal(flags.peer(1 - ad.device_id()).at[0], 1)

    xs = [np.zeros((8, 16), np.float32) for _ in range(2)]
    flags = [np.zeros(1, np.int32) for _ in range(2)]
    with pytest.raises(ad.InterpretError, match="await_async_copy"):
        early.interpret(xs, flags, devices=2)


def test_a_traced_peer_out_of_range_is_an_interpreter_error():
    @ad.kernel(grid=(1,))
    def too_far(flags):
        ad.signal(flags.peer(ad.device_id() + 1).at[0], 1)

    flags = [np.zeros(1, np.int32) for _ in range(2)]
    with pytest.raises(ad.InterpretError, match="peer 2 is not a device of the launch, which runs on 2"):
        too_far.interpret(flags, devices=2)


def test_a_static_peer_out_of_range_is_a_trace_error():
    @ad.kernel(grid=(1,))
    def too_far(flags):
        ad.signal(flags.peer(2).at[0], 1)

    with pytest.raises(ad.TraceError, match=r"flags.peer\(2\): the kernel runs on 2 device"):
        too_far.interpret([np.zeros(1, np.int32)] * 2, devices=2)


def test_peer_of_shared_memory_without_a_cluster_or_of_a_view_is_a_trace_error():
    @ad.kernel(grid=(1,))
    def smem_peer(x):
        ad.smem((8,), ad.float32).peer(1)

    @ad.kernel(grid=(1,))
    def view_peer(x):
        x.at[0].peer(1)

    arrays = [np.zeros(8, np.float32)] * 2
    # Shared memory has a peer copy in the other CTAs of a cluster, never on another device.
    with pytest.raises(ad.TraceError,
                       match=r"holds one CTA .* another device is x.peer\(pe\) of a kernel array argument"):
        smem_peer.interpret(arrays, devices=2)
    with pytest.raises(ad.TraceError, match=r"x.peer\(pe\).at\[...\]"):
        view_peer.interpret(arrays, devices=2)


def test_apis_of_local_memory_refuse_a_peer_array():
    @ad.kernel(grid=(1,))
    def tile_load(x):
        ad.load(x.peer(1))

    with pytest.raises(ad.TraceError, match="only asyncdsl.async_copy"):
        tile_load.interpret([np.zeros((64, 64), np.float32)] * 2, devices=2)


def test_wait_on_a_peer_flag_and_wrong_flag_types_are_trace_errors():
    @ad.kernel(grid=(1,))
    def wait_peer(flags):
        ad.wait_signal(flags.peer(1).at[0], "ge", 1)

    @ad.kernel(grid=(1,))
    def float_flags(flags):
        ad.signal(flags.at[0], 1)

    with pytest.raises(ad.TraceError, match="this device's flags only"):
        wait_peer.interpret([np.zeros(1, np.int32)] * 2, devices=2)
    with pytest.raises(ad.TraceError, match="int32 or uint32"):
        float_flags.interpret([np.zeros(1, np.float32)] * 2, devices=2)


def test_clusters_and_warpgroups_of_several_devices_run_together():
    @ad.kernel(grid=(2,), cluster=(2,), block=256)
    def exchange(x, out, flags):
        # Warpgroup 0 of CTA c sends rows 2c, 2c + 1 to the other device and flags 2c there;
        # warpgroup 1 flags 2c + 1, then waits for both flags of its CTA from the other device.
        c, w, other = ad.program_id(0), ad.warpgroup_idx(), 1 - ad.device_id()
        buf = ad.smem((2, 16), ad.float32)
        loaded = ad.barrier()
        with ad.when(w == 0):
            ad.async_copy(x.at[ad.ds(c * 2, 2), :], buf, barrier=loaded)
            loaded.wait()
            ad.async_copy(buf, out.peer(other).at[ad.ds(c * 2, 2), :])
            ad.await_async_copy()
        ad.signal(flags.peer(other).at[c * 2 + w], 1)
        with ad.when(w == 1):
            ad.wait_signal(flags.at[c * 2], "eq", 1)
            ad.wait_signal(flags.at[c * 2 + 1], "eq", 1)

    xs = [np.arange(64, dtype=np.float32).reshape(4, 16) + 100 * d for d in range(2)]
    outs = [np.zeros((4, 16), np.float32) for _ in range(2)]
    flags = [np.zeros(4, np.int32) for _ in range(2)]
    exchange.interpret(xs, outs, flags, devices=2)
    np.testing.assert_array_equal(outs[0], xs[1])
    np.testing.assert_array_equal(outs[1], xs[0])
    assert all((f == 1).all() for f in flags)


def _all_gather_gemm_is_exact(devices: int, rows: int = 128, k: int = 192, n: int = 256,
                              seed: int = 0) -> bool:
    """The fused all-gather GEMM on `devices` emulated devices against numpy (small integers: exact)."""
    import ml_dtypes

    from asyncdsl.kernels.all_gather_gemm import all_gather_gemm

    rng = np.random.default_rng(seed)
    shards = [rng.integers(-3, 4, (rows, k)).astype(ml_dtypes.bfloat16) for _ in range(devices)]
    weights = [rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16) for _ in range(devices)]
    outs = all_gather_gemm(shards, weights, ctas=2)
    gathered = np.concatenate(shards).astype(np.float64)
    expected = [(gathered @ w.astype(np.float64)).astype(ml_dtypes.bfloat16) for w in weights]
    return all(out.view(np.uint16).tobytes() == e.view(np.uint16).tobytes() for out, e in zip(outs, expected))


@pytest.mark.parametrize("devices", [2, 4])
def test_the_all_gather_matmul_is_exact(devices):
    assert _all_gather_gemm_is_exact(devices, rows=128, k=128, n=256, seed=devices)


def test_the_all_gather_matmul_wants_whole_tiles_of_rows():
    with pytest.raises(ad.TraceError, match="whole 128-row tiles"):
        _all_gather_gemm_is_exact(2, rows=64)


def _integer_operands(make, rows: int = 128, k: int = 64, n: int = 256):
    rng = np.random.default_rng(3)
    return make(rng.integers(-3, 4, (rows, k))), make(rng.integers(-3, 4, (k, n)))


def test_the_all_gather_matmul_of_numpy_arrays_runs_on_one_device():
    import ml_dtypes

    from asyncdsl.kernels.all_gather_gemm import all_gather_gemm

    a, b = _integer_operands(lambda x: x.astype(ml_dtypes.bfloat16))
    c = all_gather_gemm(a, b, ctas=2)  # as the collectives take one array: it was an IndexError
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert c.view(np.uint16).tobytes() == expected.view(np.uint16).tobytes()


def test_the_all_gather_matmul_of_gpu_arrays_runs_without_a_job(monkeypatch):
    # Torch tensors take the GPU path (interpreted here): without NVSHMEM a one-device GEMM, as
    # every one-device kernel runs, where it was a DistributedError asking for a job.
    torch = pytest.importorskip("torch")
    from asyncdsl.kernels.all_gather_gemm import all_gather_gemm

    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")
    a, b = _integer_operands(lambda x: torch.from_numpy(x).to(torch.bfloat16))
    c = all_gather_gemm(a, b, ctas=2)
    assert torch.equal(c, (a.double() @ b.double()).to(torch.bfloat16))
