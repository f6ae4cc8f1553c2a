"""`partition-collectives`: split collective loads across the CTAs of a cluster.

Collective copies are rejected until this pass splits them; every other copy passes unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class PartitionCollectives(ModulePass):
    name = "partition-collectives"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        return None
