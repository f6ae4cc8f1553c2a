"""Warpgroup roles with setmaxnreg, cluster-wide arrivals and persistent grids on the H200,
bit-exact against numpy and against the interpreter on the same inputs.

    python3 -m pytest -q tests/gpu/test_roles_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import gpu_and_interpreter, hopper_or_skip
from roles_kernels import (
    expected_multicast_ring,
    expected_turn_order,
    multicast_ring,
    paired_persistent_copy,
    persistent_copy,
    producer_consumer,
    turn_order,
)
from support import random_bits, same_bytes

import asyncdsl as ad
from asyncdsl import runtime
from asyncdsl.runtime import device_facts, to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu


def test_producer_and_consumer_roles_with_setmaxnreg():
    x = random_bits((8 * 4 * 64, 64), ad.float32, seed=11)  # 8 CTAs of 4 tiles
    (on_gpu,), (interpreted,) = gpu_and_interpreter(producer_consumer, [x], [np.zeros_like(x)])
    assert same_bytes(on_gpu, x) and same_bytes(interpreted, x)


def test_collective_arrivals_let_both_producers_refill_the_slot():
    x = random_bits((4 * 3 * 64, 64), ad.float32, seed=12)  # 4 clusters of 3 steps
    (on_gpu,), (interpreted,) = gpu_and_interpreter(multicast_ring, [x],
                                                    [np.zeros((2 * x.shape[0], 64), np.float32)])
    expected = expected_multicast_ring(x)
    assert same_bytes(on_gpu, expected) and same_bytes(interpreted, expected)


def persistent_run(kernel, x) -> int:
    """Run a persistent copy of x; check the copy and that every CTA, and only those, saw the
    grid's size; the CTAs the persistent grid launched."""
    seen = np.full((1024, 128), -1, np.int32)
    arrays = [to_device(a) for a in (x, np.zeros_like(x), seen)]
    kernel(*arrays)
    y, seen = to_host(arrays[1]), to_host(arrays[2])
    assert same_bytes(y, x)
    programs = runtime.persistent_grid(runtime.load_kernel(kernel.compile(*arrays).binary))[0]
    assert (seen[:programs] == programs).all() and (seen[programs:] == -1).all()
    return programs


def test_persistent_grid_fills_the_device_in_whole_clusters():
    programs = persistent_run(persistent_copy, random_bits((5000, 32), ad.float32, seed=13))
    # 128-thread CTAs with a few KiB of shared memory: the SMs hold several clusters of 2 each.
    assert programs % 2 == 0 and programs >= device_facts(0).multiprocessor_count


def test_a_kernel_built_for_two_ctas_a_multiprocessor_gets_them():
    programs = persistent_run(paired_persistent_copy, random_bits((2000 * 64, 128), ad.float32, seed=14))
    # The roles' 40 + 216 registers are two CTAs' 2 x 256 x 128; one CTA would start at 248 each.
    assert programs == 2 * device_facts(0).multiprocessor_count


def test_warpgroups_take_turns_in_order():
    x = (np.arange(8 * 64) % 7).astype(np.float32).reshape(8, 64)
    (on_gpu,), (interpreted,) = gpu_and_interpreter(turn_order, [x], [np.zeros_like(x)], TURNS=5)
    expected = expected_turn_order(x, 5)
    assert same_bytes(on_gpu, expected) and same_bytes(interpreted, expected)


@pytest.mark.parametrize("compiler", ["auto", "nvjitlink"])
def test_the_register_hand_over_survives_the_runtimes_compiler(monkeypatch, tmp_path, compiler):
    """The attention kernel (a producer and two consumers at 232 registers) as the runtime loads it.
    By default no thread spills and no advisory is raised; nvJitLink compiles PTX as one unit of
    a program to be linked, drops `setmaxnreg` there, and the runtime says so."""
    import warnings

    from asyncdsl.kernels.attention import attention_kernel
    from asyncdsl.runtime.jit_link import NvJitLinkCompiler

    if compiler == "nvjitlink":
        try:
            NvJitLinkCompiler()
        except Exception as error:  # noqa: BLE001
            pytest.skip(f"nvJitLink is not available: {error}")
    monkeypatch.setenv("ASYNCDSL_PTX_COMPILER", compiler)
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path))
    specs = [ad.ArraySpec((1, 2, 256, 128), ad.bfloat16)] * 4 + [ad.ArraySpec((1, 2, 256), ad.float32)]
    binary = attention_kernel.compile(*specs).binary
    runtime.clear_loaded_kernels()
    try:
        if compiler == "auto":
            with warnings.catch_warnings():
                warnings.simplefilter("error", ad.PerformanceWarning)
                kernel = runtime.load_kernel(binary)
            assert kernel.local_bytes_per_thread == 0
        else:
            with pytest.warns(ad.PerformanceWarning, match="setmaxnreg"):
                runtime.load_kernel(binary)
    finally:
        runtime.clear_loaded_kernels()
