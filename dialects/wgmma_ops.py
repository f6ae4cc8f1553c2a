"""Warpgroup matrix multiply (`asyncdsl.wgmma`) and waiting for it (`asyncdsl.wgmma_wait`).

    asyncdsl.wgmma %acc, %a, %b, %accumulate {b_transposed} : !asyncdsl.registers<vector<128x256xf32>>,
        memref<128x64xbf16, #asyncdsl.smem<...>>, memref<64x256xbf16, #asyncdsl.smem<...>>, i1
    asyncdsl.wgmma_wait 1

`acc += a @ b` (or `acc = a @ b` where `accumulate` is false), issued asynchronously: the
accumulator registers and the operands' shared memory are in use until a `wgmma_wait` retires
the group.  `a` is an SMEM buffer or a register tile (16-bit, `wgmma` layout), `b` an SMEM
buffer; a buffer whose stored matrix is the operand's transpose (`buf.T` in kernel code) is
marked `a_transposed`/`b_transposed`.  `plan-smem-access` fills `a_plan`/`b_plan`: the
descriptor constants of each SMEM operand (`hw.wgmma.OperandPlan`), which `asyncdsl dump`
shows and the lowering and the interpreter use.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntAttr, IntegerAttr, IntegerType, MemRefType, UnitAttr
from xdsl.dialects.builtin import VectorType, i1
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_attr_definition, irdl_op_definition
from xdsl.irdl import operand_def, opt_prop_def, prop_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl import dtypes
from asyncdsl.dialects.descriptor_attrs import DescriptorAttr, DescriptorField
from asyncdsl.dialects.ir_utils import int_prop, is_smem, logical_shape, registers_type, shaped_type
from asyncdsl.dialects.ir_utils import smem_layout
from asyncdsl.dialects.memory_attrs import RegistersType
from asyncdsl.errors import MmaError
from asyncdsl.hw.wgmma import MmaTypes, OperandPlan, check_shapes, mma_types, plan_operand


@irdl_attr_definition
class WgmmaOperandAttr(DescriptorAttr):
    """What the tensor cores are told of one SMEM operand (`hw.wgmma.OperandPlan`), printed
    `#asyncdsl.wgmma_operand<k_major = 1, swizzle = 128, lbo = 16, sbo = 1024, k_offsets = [0, 32, 64, 96],
    mn_offsets = [0, 8192]>` (bytes)."""

    name = "asyncdsl.wgmma_operand"
    SPEC = OperandPlan
    FIELDS = (
        DescriptorField("k_major", "k_major", "flag"),
        DescriptorField("swizzle", "swizzle"),
        DescriptorField("lbo", "lbo"),
        DescriptorField("sbo", "sbo"),
        DescriptorField("k_offsets", "k_offsets", "ints"),
        DescriptorField("mn_offsets", "mn_offsets", "ints"),
    )

    k_major: IntAttr
    swizzle: IntAttr
    lbo: IntAttr
    sbo: IntAttr
    k_offsets: ArrayAttr[IntAttr]
    mn_offsets: ArrayAttr[IntAttr]


def _dtype(type_: Attribute) -> dtypes.DType:
    return dtypes.from_mlir(shaped_type(type_).element_type)


def _matrix(type_: Attribute, transposed: bool) -> tuple[int, int]:
    shape = logical_shape(type_) if isinstance(type_, MemRefType) else tuple(shaped_type(type_).get_shape())
    if len(shape) != 2:
        raise MmaError(f"a wgmma operand is a 2-d matrix, got shape {shape}")
    rows, columns = shape
    return (columns, rows) if transposed else (rows, columns)


def _plan(buffer: SSAValue, k_is_column: bool, types: MmaTypes, role: str) -> OperandPlan:
    """The descriptor plan of the SMEM operand `buffer` (its layout's), K its stored column or row."""
    return plan_operand(smem_layout(buffer.type), logical_shape(buffer.type), _dtype(buffer.type),
                        k_is_column, types, role, whole_mn=role == "wgmma's B")


@irdl_op_definition
class WgmmaOp(IRDLOperation):
    """`acc (+)= a @ b` on the tensor cores, asynchronously (one wgmma group)."""

    name = "asyncdsl.wgmma"
    acc = operand_def(RegistersType)
    a = operand_def(MemRefType | VectorType)
    b = operand_def(MemRefType)
    accumulate = operand_def(IntegerType)
    a_transposed = opt_prop_def(UnitAttr)
    b_transposed = opt_prop_def(UnitAttr)
    a_plan = opt_prop_def(WgmmaOperandAttr)
    b_plan = opt_prop_def(WgmmaOperandAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$acc `,` $a `,` $b `,` $accumulate attr-dict `:` type($acc) `,` type($a) `,` type($b) `,` "
        "type($accumulate)"
    )

    def __init__(self, acc: SSAValue, a: SSAValue, b: SSAValue, accumulate: SSAValue,
                 a_transposed: bool = False, b_transposed: bool = False):
        properties: dict[str, Attribute] = {}
        if a_transposed:
            properties["a_transposed"] = UnitAttr()
        if b_transposed:
            properties["b_transposed"] = UnitAttr()
        super().__init__(operands=[acc, a, b, accumulate], properties=properties)

    @property
    def a_in_registers(self) -> bool:
        return isinstance(self.a.type, VectorType)

    @property
    def accumulator(self) -> VectorType:
        """The type of the accumulator tile."""
        return registers_type(self.acc.type).tile

    @property
    def shapes(self) -> tuple[tuple[int, ...], tuple[int, int], tuple[int, int]]:
        """(acc, a, b) as the matrices of `acc += a @ b` (the accumulator's shape as it is, which
        `check_shapes` checks)."""
        return (tuple(self.accumulator.get_shape()), _matrix(self.a.type, self.a_transposed is not None),
                _matrix(self.b.type, self.b_transposed is not None))

    @property
    def types(self) -> MmaTypes:
        return mma_types(_dtype(self.accumulator), _dtype(self.a.type), _dtype(self.b.type))

    def operand_plans(self) -> tuple[OperandPlan | None, OperandPlan]:
        """The descriptor plans of the SMEM operands (None for a register A), from their layouts."""
        types = self.types
        # A is (M, K): K is the stored column unless transposed; B is (K, N): the reverse.
        a = None if self.a_in_registers else _plan(self.a, self.a_transposed is None, types, "wgmma's A")
        return a, _plan(self.b, self.b_transposed is not None, types, "wgmma's B")

    def verify_(self) -> None:
        if self.accumulate.type != i1:
            raise VerifyException("wgmma's accumulate is an i1")
        for value, what in ((self.a, "A"), (self.b, "B")):
            if isinstance(value.type, MemRefType) and not is_smem(value.type):
                raise VerifyException(f"wgmma's {what} must be in shared memory or (A only) registers")
        if self.a_in_registers and self.a_transposed is not None:
            raise VerifyException("a register A operand cannot be transposed")
        try:
            types = self.types
            check_shapes(*self.shapes, types)
            if self.a_in_registers and types.a.bits != 16:
                raise MmaError(f"wgmma's A can come from registers for 16-bit types only, not {types.a}")
            self.operand_plans()
        except MmaError as error:
            raise VerifyException(error.message) from None


@irdl_op_definition
class WgmmaWaitOp(IRDLOperation):
    """Wait until at most `pending` of this warpgroup's wgmma groups are still running."""

    name = "asyncdsl.wgmma_wait"
    pending = prop_def(IntegerAttr)

    assembly_format = "$pending attr-dict"

    def __init__(self, pending: int):
        super().__init__(properties={"pending": int_prop(pending)})

    def verify_(self) -> None:
        if self.pending.value.data < 0:
            raise VerifyException("wgmma_wait's pending count must be >= 0")


OPERATIONS: tuple[type[Operation], ...] = (WgmmaOp, WgmmaWaitOp)
ATTRIBUTES: tuple[type[Attribute], ...] = (WgmmaOperandAttr,)
