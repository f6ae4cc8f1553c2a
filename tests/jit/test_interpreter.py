"""Calling the interpreter: `kernel.interpret`, `ASYNCDSL_INTERPRET=1`, the bundled examples, speed."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import types

import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.examples
from asyncdsl.examples.tile_copy import tile_copy


def test_interpret_env_runs_ordinary_calls_on_numpy(monkeypatch):
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")
    x = np.arange(64 * 96, dtype=np.float32).reshape(64, 96)
    y = np.zeros_like(x)
    tile_copy(x, y, BM=32, BN=32)
    assert np.array_equal(x, y)


def test_interpret_env_copies_torch_tensors_back_in_place(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")
    x = torch.randn(64, 64).to(torch.bfloat16)
    y = torch.zeros_like(x)
    tile_copy(x, y, BM=32, BN=32)
    assert torch.equal(x, y)


def test_interpret_env_takes_torch_tensors_of_the_element_types_a_launch_takes(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")
    x = torch.rand(64, 64) < 0.5
    y = torch.zeros_like(x)
    tile_copy(x, y, BM=32, BN=32)  # bool as bytes, as a GPU launch takes it
    assert torch.equal(x, y)
    with pytest.raises(ad.ArgumentError, match="argument 'src' has element type torch.complex64") as caught:
        tile_copy(x.to(torch.complex64), y, BM=32, BN=32)
    assert caught.value.location.file == __file__


def test_interpret_env_refuses_jax_arrays(monkeypatch):
    # A stand-in `jax` module: only `isinstance(value, jax.Array)` is consulted.
    fake_jax = types.ModuleType("jax")

    class Array:
        shape, dtype = (32, 32), np.dtype(np.float32)

    fake_jax.Array = Array
    monkeypatch.setitem(sys.modules, "jax", fake_jax)
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")
    with pytest.raises(ad.ArgumentError,
                       match="argument 'dst' is a JAX array, which cannot be written in place"):
        tile_copy(np.zeros((32, 32), np.float32), Array(), BM=32, BN=32)


def test_interpret_takes_numpy_arrays_only():
    with pytest.raises(ad.ArgumentError,
                       match="argument 'src' is a builtins.list; kernel.interpret runs on numpy"):
        tile_copy.interpret([[0.0] * 32] * 32, np.zeros((32, 32), np.float32), BM=32, BN=32)


def test_interpret_refuses_non_contiguous_arrays():
    x = np.zeros((64, 32), np.float32)
    y = np.zeros((64, 64), np.float32)[:, :32]
    with pytest.raises(ad.ArgumentError, match="argument 'dst' is not contiguous"):
        tile_copy.interpret(x, y, BM=32, BN=32)


@ad.kernel(grid=(1,), block=128)
def _store_rows(x, y):
    ad.store(y.at[0:128], ad.load(x.at[0:128]) + 1.0)


def test_interpret_reads_read_only_arrays_and_refuses_writing_them():
    x = np.frombuffer(np.arange(32 * 32, dtype=np.float32).tobytes(), np.float32).reshape(32, 32)
    y = np.zeros_like(x)
    tile_copy.interpret(x, y, BM=32, BN=32)  # a read-only source is fine
    assert np.array_equal(x, y)
    y.setflags(write=False)
    with pytest.raises(ad.ArgumentError, match="TMA store to argument 'dst', whose numpy array is read-only"):
        tile_copy.interpret(np.ones_like(x), y, BM=32, BN=32)
    assert np.array_equal(x, y)
    rows = np.zeros(128, np.float32)
    rows.setflags(write=False)  # a register tile's store names its own line, as the TMA store does
    with pytest.raises(ad.ArgumentError, match=r"test_interpreter.py:\d+: kernel _store_rows, .*: a store to "
                                               r"argument 'y', whose numpy array is read-only"):
        _store_rows.interpret(np.ones(128, np.float32), rows)
    assert not rows.any()


def test_grid_must_be_whole_clusters():
    @ad.kernel(grid=(3,), cluster=(2, 1, 1))
    def noop(x):
        ad.program_id(0)

    with pytest.raises(ad.ArgumentError, match="not a whole number of clusters"):
        noop.interpret(np.zeros(16, np.float32))


def example_modules():
    for module in pkgutil.iter_modules(asyncdsl.examples.__path__):
        yield importlib.import_module(f"asyncdsl.examples.{module.name}")


@pytest.mark.parametrize("example", [m for m in example_modules() if hasattr(m, "main")],
                         ids=lambda m: m.__name__)
def test_every_example_matches_numpy_in_the_interpreter(example, monkeypatch):
    import asyncdsl.runtime

    monkeypatch.setattr(asyncdsl.runtime, "has_gpu", lambda: False)
    assert example.main() == 0


def test_a_4096_square_f32_copy_takes_seconds():
    x = np.random.default_rng(0).standard_normal((4096, 4096), dtype=np.float32)
    y = np.zeros_like(x)
    # compile outside the timing
    tile_copy.interpret(x[:128, :128].copy(), y[:128, :128].copy(), BM=128, BN=128)
    start = time.perf_counter()
    tile_copy.interpret(x, y, BM=128, BN=128)  # 1024 CTAs
    elapsed = time.perf_counter() - start
    print(f"\n4096x4096 f32 tile copy, 1024 CTAs of 128x128, interpreted in {elapsed:.2f} s")
    assert np.array_equal(x, y)
    assert elapsed < 20, f"{elapsed:.1f} s"
