"""The wgmma fuzzer's CI slice: a few configurations of a fixed seed in the interpreter against
the model of its documented numerics, and the model against exact products where they are exact.
`python -m asyncdsl.fuzz.wgmma` runs any other slice."""

from __future__ import annotations

import random

import ml_dtypes
import numpy as np
import pytest

from asyncdsl.fuzz.copies.toolchain import have_ptxas
from asyncdsl.fuzz.tiles.run import run_program
from asyncdsl.fuzz.wgmma.config import draw_config
from asyncdsl.fuzz.wgmma.generate import program_for
from asyncdsl.fuzz.wgmma.model import mma

SEED = 5
CONFIGURATIONS = (0, 1)


@pytest.mark.skipif(not have_ptxas(), reason="ptxas not found (the test extra installs it)")
@pytest.mark.parametrize("index", CONFIGURATIONS)
def test_a_configuration_of_the_fixed_slice_computes_the_model(index, tmp_path):
    result = run_program(program_for(SEED, index), str(tmp_path), 120.0)
    assert result.outcome == "ok", f"{result.outcome}: {result.detail}\n{result.source}"


def test_configurations_keep_the_tensor_cores_rules():
    for index in range(500):
        config = draw_config(random.Random(index))
        assert config.m % 64 == 0 and config.k % {2: 16, 4: 8, 1: 32}[_size(config.a_dtype)] == 0
        assert config.a_k_major or _size(config.a_dtype) == 2
        assert not config.a_in_registers or (config.a_k_major and _size(config.a_dtype) == 2)


def _size(dtype: str) -> int:
    return {"bfloat16": 2, "float16": 2, "float32": 4}.get(dtype, 1)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float8_e4m3fn", "int8"])
def test_the_model_is_exact_on_small_integers(dtype):
    numpy = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32,
             "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "int8": np.int8}[dtype]
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (64, 64)).astype(numpy)
    b = rng.integers(-4, 5, (64, 16)).astype(numpy)
    acc = rng.integers(-100, 100, (64, 16)).astype(np.int32 if dtype == "int8" else np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64) + acc
    assert np.array_equal(mma(acc, a, b, dtype, True), exact)
    assert np.array_equal(mma(acc, a, b, dtype, False), exact - acc)


def test_the_model_truncates_toward_zero_at_26_bits_of_the_largest_term():
    # 1 + sixteen products of 2**-26 (bf16 2**-13 squared): each below the quantum 2**-25 of
    # the largest term, so each is cut to 0; the exact sum 1 + 2**-22 would be a float32.
    a = np.full((1, 16), 2.0 ** -13).astype(ml_dtypes.bfloat16)
    b = np.full((16, 1), 2.0 ** -13).astype(ml_dtypes.bfloat16)
    one = np.ones((1, 1), np.float32)
    assert mma(one, a, b, "bfloat16", True)[0, 0] == 1.0
    assert mma(-one, a, -b, "bfloat16", True)[0, 0] == -1.0


def test_tf32_reads_ten_mantissa_bits():
    a = np.array([[1.0 + 2.0 ** -10 + 2.0 ** -11] + [0.0] * 7], np.float32)
    b = np.zeros((8, 1), np.float32)
    b[0, 0] = 1.0
    assert mma(np.zeros((1, 1), np.float32), a, b, "float32", False)[0, 0] == np.float32(1.0 + 2.0 ** -10)
