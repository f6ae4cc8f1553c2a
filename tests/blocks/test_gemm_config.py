"""The GEMM configuration value (`asyncdsl.blocks.gemm_config`)."""

from __future__ import annotations

import pytest

import asyncdsl as ad
from asyncdsl.blocks.gemm_config import GemmConfig


def test_the_docstring_example_holds():
    config = GemmConfig(BN=128, STAGES=6, SPLIT_K=2)
    config.check()
    assert config.part == (64, 128)
    assert config.constexprs()["BN"] == 128 and config.constexprs()["SPLIT_K"] == 2
    assert GemmConfig(SPLIT="n").part == (128, 128) and GemmConfig().parts(consumers=1) == (1, 1)


@pytest.mark.parametrize("change,message", [
    ({"BK": 96}, "BK must be a positive multiple of 64"), ({"STAGES": 0}, "STAGES must be a positive int"),
    ({"SPLIT_K": 0}, "SPLIT_K must be a positive int"), ({"SPLIT": "k"}, "SPLIT says how the consumers"),
    ({"EPILOGUE": "st"}, "EPILOGUE is 'tma'"), ({"SHARE": "c"}, "SHARE says which operand"),
    ({"IN_FLIGHT": 2}, "IN_FLIGHT says whether"), ({"EVICT_FIRST": "c"}, "EVICT_FIRST names the operands"),
    ({"STAGES": 1}, "STAGES must be 2 or more"), ({"BM": 64}, "a 32 x 256 accumulator"),
    ({"SPLIT": "n", "BN": 64}, "halved by columns, gives each consumer a 128 x 32"),
    ({"BN": 512}, "its columns 256 at most"),
])
def test_a_configuration_no_kernel_can_be_built_for_is_refused(change, message):
    with pytest.raises(ad.TraceError, match=message):
        GemmConfig().with_(**change).check()


def test_what_one_consumer_or_no_wgmma_in_flight_can_be_built_with_is_taken():
    GemmConfig(BM=64, BN=128).check(consumers=1)  # the narrow kernel's whole 64-row tiles
    GemmConfig(STAGES=1, IN_FLIGHT=0).check()
