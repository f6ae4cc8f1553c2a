"""Turn-taking among warpgroups: `parties` consecutive warpgroups from `first` run the bodies of
their turns one warpgroup at a time, in order, starting with `first` (FlashAttention-3's
scheduling of two consumers: one issues its tensor-core work while the other does its softmax).

    asyncdsl.alloc_turns warpgroups 0 parties 2 barrier 4     // warpgroups 0, 1 take turns
    asyncdsl.take_turn warpgroups 0 parties 2 barrier 4       // wait for this warpgroup's turn
    ...
    asyncdsl.pass_turn warpgroups 0 parties 2 barrier 4       // the next warpgroup's turn

Named barrier `barrier + i` carries the turn to party i: party i waits on it (`bar.sync`, 256
threads) and party i - 1 arrives on it (`bar.arrive`) when its turn ends; the allocation has the
last party arrive once for the first turn (docs/hardware.md §16).
"""

from __future__ import annotations

from xdsl.dialects.builtin import I64, IntegerAttr
from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import int_prop
from asyncdsl.hw.limits import NAMED_BARRIERS


class _TurnsOp(IRDLOperation):
    """The group every turn op names: its warpgroups and its first named barrier."""

    first = prop_def(IntegerAttr[I64])
    parties = prop_def(IntegerAttr[I64])
    barrier = prop_def(IntegerAttr[I64])

    assembly_format = "`warpgroups` $first `parties` $parties `barrier` $barrier attr-dict"

    def __init__(self, first: int, parties: int, barrier: int):
        super().__init__(properties={"first": int_prop(first), "parties": int_prop(parties),
                                     "barrier": int_prop(barrier)})

    @property
    def group(self) -> tuple[int, int, int]:
        return self.first.value.data, self.parties.value.data, self.barrier.value.data

    def verify_(self) -> None:
        first, parties, barrier = self.group
        if first < 0 or parties < 2:
            raise VerifyException(
                f"turns need two or more warpgroups from warpgroup >= 0, got {parties} from {first}")
        if not 1 <= barrier or barrier + parties > NAMED_BARRIERS:
            raise VerifyException(
                f"turns use named barriers {barrier}..{barrier + parties - 1}, outside "
                f"1..{NAMED_BARRIERS - 1}")


@irdl_op_definition
class AllocTurnsOp(_TurnsOp):
    """The group's named barriers, primed so that warpgroup `first` has the first turn."""

    name = "asyncdsl.alloc_turns"


@irdl_op_definition
class TakeTurnOp(_TurnsOp):
    """The executing warpgroup (a party) waits until it is its turn."""

    name = "asyncdsl.take_turn"


@irdl_op_definition
class PassTurnOp(_TurnsOp):
    """The executing warpgroup's turn ends: the next party (cyclically) has it."""

    name = "asyncdsl.pass_turn"


OPERATIONS: tuple[type[Operation], ...] = (AllocTurnsOp, TakeTurnOp, PassTurnOp)
