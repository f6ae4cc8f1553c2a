"""Elementwise tile ops that `arith` has only for scalars: comparisons, select, conversions.

xDSL's `arith.cmpf`/`cmpi` type their result as a scalar `i1`, `arith.select` takes a scalar
condition, and its integer casts take scalars only; tiles need all three elementwise:

    %m = asyncdsl.compare lt %a, %b : vector<64x128xf32>, vector<64x128xf32> -> vector<64x128xi1>
    %s = asyncdsl.select %m, %a, %b : vector<64x128xi1>, vector<64x128xf32>, vector<64x128xf32>
        -> vector<64x128xf32>
    %h = asyncdsl.convert %a : vector<64x128xf32> -> vector<64x128xbf16>

Integers are signed (int8, int16, int32) and `i1` is unsigned (true is 1): the element types
alone say what a comparison or a conversion means (docs/register-tiles.md).  `convert` also
takes scalars (a traced index, cast to i32, becoming a tile's dtype).
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerType, VectorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import vector_type
from asyncdsl.dialects.option_attrs import ComparisonAttr
from asyncdsl.hw.options import Comparison


def _shape(type_: Attribute) -> tuple[int, ...] | None:
    return tuple(type_.get_shape()) if isinstance(type_, VectorType) else None


def _element(type_: Attribute) -> Attribute:
    return type_.element_type if isinstance(type_, VectorType) else type_


@irdl_op_definition
class CompareOp(IRDLOperation):
    """`lhs <predicate> rhs` elementwise: a bool tile."""

    name = "asyncdsl.compare"
    predicate = prop_def(ComparisonAttr)
    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    result = result_def(VectorType)

    assembly_format = "$predicate $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, predicate: Comparison | str, lhs: SSAValue, rhs: SSAValue):
        super().__init__(
            operands=[lhs, rhs],
            properties={"predicate": ComparisonAttr(Comparison(predicate))},
            result_types=[VectorType(IntegerType(1), vector_type(lhs.type).get_shape())],
        )

    def verify_(self) -> None:
        if self.lhs.type != self.rhs.type:
            raise VerifyException(f"compare of a {self.lhs.type} and a {self.rhs.type}")
        if (_shape(self.result.type) != _shape(self.lhs.type)
                or self.result.type.element_type != IntegerType(1)):
            raise VerifyException("compare makes a bool (i1) tile of its operands' shape")


@irdl_op_definition
class SelectOp(IRDLOperation):
    """`yes` where `condition` holds, else `no`, elementwise."""

    name = "asyncdsl.select"
    condition = operand_def(VectorType)
    yes = operand_def(VectorType)
    no = operand_def(VectorType)
    result = result_def(VectorType)

    assembly_format = ("$condition `,` $yes `,` $no attr-dict `:` type($condition) `,` type($yes) `,` "
                       "type($no) `->` type($result)")

    def __init__(self, condition: SSAValue, yes: SSAValue, no: SSAValue):
        super().__init__(operands=[condition, yes, no], result_types=[yes.type])

    def verify_(self) -> None:
        if not (self.yes.type == self.no.type == self.result.type):
            raise VerifyException("select's two values and its result must have one type")
        if self.condition.type != VectorType(IntegerType(1), self.yes.type.get_shape()):
            raise VerifyException("select's condition must be a bool (i1) tile of the values' shape")


@irdl_op_definition
class ConvertOp(IRDLOperation):
    """`value` converted elementwise to the result's element type (or a scalar to a scalar)."""

    name = "asyncdsl.convert"
    value = operand_def()
    result = result_def()

    assembly_format = "$value attr-dict `:` type($value) `->` type($result)"

    def __init__(self, value: SSAValue, result_type: Attribute):
        super().__init__(operands=[value], result_types=[result_type])

    def verify_(self) -> None:
        if _shape(self.value.type) != _shape(self.result.type):
            raise VerifyException(f"convert keeps the shape: {self.value.type} -> {self.result.type}")
        if _element(self.result.type) == IntegerType(1):
            raise VerifyException("convert does not make bools; compare instead")


OPERATIONS: tuple[type[Operation], ...] = (CompareOp, SelectOp, ConvertOp)
