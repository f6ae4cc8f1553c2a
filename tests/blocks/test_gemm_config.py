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
])
def test_a_configuration_no_kernel_can_be_built_for_is_refused(change, message):
    with pytest.raises(ad.TraceError, match=message):
        GemmConfig().with_(**change).check()
