"""What the compiler takes on trust, stated in the IR so that it can be checked at run time.

    %s = asyncdsl.multiple_of %start, 8 : index       // the user's hint: %start % 8 == 0
    %ok = asyncdsl.check %c "message" of %x, %y        // the compiler's assumption %c about %x, %y
    asyncdsl.check_tile %t "message" : vector<64xi1>     // every element of the bool tile %t holds

`multiple_of` is `asyncdsl.multiple_of(value, n)` in kernel code (Triton's `tl.multiple_of`): its
result is its operand, and the divisibility analysis (`passes/resolve/index_facts.py`) may use
the hint to prove a traced start tile-aligned.  `check` is built by `resolve-transforms` for an
assumption a copy needs but the compiler cannot prove (a traced TMA store coordinate is not
negative, a bulk copy's traced address is 16-byte aligned, ...); its result is its condition, which
the copy uses as a guard so that a broken assumption cannot fault the GPU.  `check_tile` is
`asyncdsl.frontend.assume.check_all(tile, message)` in kernel code: a kernel's own statement
about data (a block table's entries name pages of the cache), which the kernel guards itself.

Both are checked wherever the kernel runs in a mode that checks: always in the interpreter (an
`AssumptionError` at the op's line), and on the GPU when compiled with `ASYNCDSL_DEBUG=1` (the
first failure of a launch is reported after it); otherwise they cost nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, IndexType, IntegerAttr, StringAttr, VectorType, i1, i64
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def, var_operand_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import IndexValued


@irdl_op_definition
class MultipleOfOp(IndexValued):
    """`value`, which the user promises is a multiple of `divisor`."""

    name = "asyncdsl.multiple_of"
    value = operand_def(IndexType)
    divisor = prop_def(IntegerAttr[I64])

    assembly_format = "$value `,` $divisor attr-dict"

    def __init__(self, value: SSAValue, divisor: int):
        super().__init__(operands=[value], properties={"divisor": IntegerAttr(divisor, i64)},
                         result_types=[IndexType()])

    def verify_(self) -> None:
        if self.divisor.value.data < 1:
            raise VerifyException(f"multiple_of needs a positive divisor, got {self.divisor.value.data}")


class _Checked(IRDLOperation):
    """A condition checked at run time; `message` says what breaks where it is false."""

    message = prop_def(StringAttr)


@irdl_op_definition
class CheckOp(_Checked):
    """The compiler's assumption `condition` about the traced indices `values`; `message` says
    what breaks when it is false (a failure reports the values too)."""

    name = "asyncdsl.check"
    condition = operand_def(i1)
    values = var_operand_def(IndexType)
    result = result_def(i1)

    assembly_format = "$condition $message (`of` $values^)? attr-dict"

    def __init__(self, condition: SSAValue, message: str, values: Sequence[SSAValue] = ()):
        super().__init__(operands=[condition, values], properties={"message": StringAttr(message)},
                         result_types=[i1])


@irdl_op_definition
class CheckTileOp(_Checked):
    """Every element of the bool tile `condition` holds; `message` says what a false one means."""

    name = "asyncdsl.check_tile"
    condition = operand_def(VectorType)

    assembly_format = "$condition $message attr-dict `:` type($condition)"

    def __init__(self, condition: SSAValue, message: str):
        super().__init__(operands=[condition], properties={"message": StringAttr(message)})


def check_message(op: MultipleOfOp | CheckOp | CheckTileOp) -> str:
    """What a run-time failure of `op` says."""
    if isinstance(op, MultipleOfOp):
        return f"asyncdsl.multiple_of promised a multiple of {op.divisor.value.data}"
    return op.message.data


OPERATIONS: tuple[type[Operation], ...] = (MultipleOfOp, CheckOp, CheckTileOp)
