"""The IR of warpgroup roles and cluster-wide arrivals prints and parses back at every stage,
and the role op's verifier holds its local rules."""

from __future__ import annotations

import pytest
from roles_kernels import multicast_ring
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

import asyncdsl as ad
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.passes.pipeline import PASS_NAMES, ir_text, make_context

STAGES = multicast_ring.stages(ad.ArraySpec((384, 64), ad.float32), ad.ArraySpec((768, 64), ad.float32))


@pytest.mark.parametrize("stage", ["trace", *[name for name in PASS_NAMES if name != "lower-to-ptx"]])
def test_every_stage_round_trips(stage):
    text = STAGES[stage]
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    assert ir_text(parsed) == text


def test_the_trace_shows_roles_and_collective_arrivals():
    text = STAGES["trace"]
    assert '"asyncdsl.warpgroup_role"() <{warpgroups = array<i64: 1>, registers = 40 : i64}>' in text
    assert 'count 1 collective ["x"]' in text


@pytest.mark.parametrize(
    ("warpgroups", "registers", "message"),
    [((), None, "at least one"), ((1, 1), None, "distinct"), ((0,), 236, "multiple of 8"),
     ((0,), 8, "[24, 256]")],
)
def test_role_verifier(warpgroups, registers, message):
    with pytest.raises(VerifyException, match=message.replace("[", r"\[")):
        ir.WarpgroupRoleOp(warpgroups, registers).verify_()
