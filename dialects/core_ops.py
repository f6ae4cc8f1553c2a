"""Core ops of the `asyncdsl` dialect: where the running program is (program, cluster and
warpgroup ids) and its shared-memory buffers."""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import I64, IndexType, IntegerAttr, MemRefType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_prop_def, prop_def, result_def
from xdsl.irdl import var_operand_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import IndexQuery, IndexValued, buffer_bytes, element_bits, int_prop, is_smem
from asyncdsl.dialects.ir_utils import logical_shape, memref_type, shape_of, smem_layout, smem_type
from asyncdsl.errors import TransformError
from asyncdsl.hw.smem_layout import SmemLayout

# ---------------------------------------------------------------------------------------------
# Identifiers of the running program.


class _AxisIdOp(IndexValued):
    axis = prop_def(IntegerAttr[I64])

    assembly_format = "$axis attr-dict"  # %0 = asyncdsl.program_id 0

    def __init__(self, axis: int):
        super().__init__(properties={"axis": int_prop(axis)}, result_types=[IndexType()])

    def verify_(self) -> None:
        if self.axis.value.data not in (0, 1, 2):
            raise VerifyException(f"axis must be 0, 1 or 2, got {self.axis.value.data}")


@irdl_op_definition
class ProgramIdOp(_AxisIdOp):
    """Index of this CTA in the grid along `axis` (`%ctaid`)."""

    name = "asyncdsl.program_id"


@irdl_op_definition
class NumProgramsOp(_AxisIdOp):
    """Number of CTAs in the grid along `axis` (`%nctaid`)."""

    name = "asyncdsl.num_programs"


@irdl_op_definition
class ClusterCtaIdOp(_AxisIdOp):
    """Index of this CTA inside its cluster along `axis` (`%cluster_ctaid`)."""

    name = "asyncdsl.cluster_cta_id"


@irdl_op_definition
class ClusterIdOp(_AxisIdOp):
    """Index of this CTA's cluster in the grid along `axis` (`%clusterid`)."""

    name = "asyncdsl.cluster_id"


@irdl_op_definition
class WarpgroupIdxOp(IndexQuery):
    """Index of the executing warpgroup inside its CTA (0 for `block=128`)."""

    name = "asyncdsl.warpgroup_idx"


# ---------------------------------------------------------------------------------------------
# Shared memory.


@irdl_op_definition
class AllocSmemOp(IRDLOperation):
    """A shared-memory buffer of the CTA. `allocate-smem` fills in `offset`.  A buffer with a
    layout has the physical shape the layout derives from its logical one."""

    name = "asyncdsl.alloc_smem"
    alignment = prop_def(IntegerAttr[I64])
    offset = opt_prop_def(IntegerAttr[I64])
    result = result_def(MemRefType)

    assembly_format = "`align` $alignment (`offset` $offset^)? attr-dict `:` type($result)"

    def __init__(self, shape: Sequence[int], element_type: Attribute, alignment: int = 128,
                 layout: SmemLayout | None = None):
        super().__init__(
            properties={"alignment": int_prop(alignment)},
            result_types=[smem_type(shape, element_type, layout)],
        )

    def verify_(self) -> None:
        if not is_smem(self.result.type):
            raise VerifyException("alloc_smem must produce a memref in #asyncdsl.smem")
        alignment = self.alignment.value.data
        if alignment < 16 or alignment & (alignment - 1):
            raise VerifyException(f"alignment must be a power of two >= 16, got {alignment}")
        if any(d <= 0 for d in shape_of(self.result)):
            raise VerifyException(f"shared-memory buffers need positive dims, got {shape_of(self.result)}")
        layout = smem_layout(self.result.type)
        if layout is None:
            return
        if layout.physical_shape != shape_of(self.result):
            raise VerifyException(
                f"a buffer of logical shape {layout.logical_shape} has the physical shape "
                f"{layout.physical_shape}, not {shape_of(self.result)}"
            )
        try:
            layout.check_element(element_bits(self.result.type))
        except TransformError as error:
            raise VerifyException(error.message) from None
        if alignment % layout.alignment:
            raise VerifyException(
                f"a buffer swizzled by {layout.swizzle_bytes} bytes is aligned to {layout.alignment}")


@irdl_op_definition
class SmemViewOp(IRDLOperation):
    """The sub-buffer of a shared-memory buffer selected by integer indices on its leading dims."""

    name = "asyncdsl.smem_view"
    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(MemRefType)

    assembly_format = "$source `[` $indices `]` attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, indices: Sequence[SSAValue]):
        shape = shape_of(source)[len(indices):]
        layout = smem_layout(source.type)
        view = None if layout is None else layout.view(len(indices))
        super().__init__(
            operands=[source, indices],
            result_types=[smem_type(shape, memref_type(source.type).element_type, view)],
        )

    def verify_(self) -> None:
        if not is_smem(self.source.type):
            raise VerifyException("smem_view takes a shared-memory buffer")
        source_shape = shape_of(self.source)
        if len(self.indices) >= len(source_shape):
            raise VerifyException(
                f"smem_view indexes leading dims only: {len(self.indices)} indices for a "
                f"{len(source_shape)}-d buffer would leave nothing"
            )
        if shape_of(self.result) != source_shape[len(self.indices):]:
            raise VerifyException("smem_view result shape must be the source's trailing dims")
        layout = smem_layout(self.source.type)
        try:
            expected = None if layout is None else layout.view(len(self.indices))
        except TransformError as error:
            raise VerifyException(f"smem_view: {error.message}") from None
        if smem_layout(self.result.type) != expected:
            raise VerifyException(
                f"smem_view of a buffer laid out as {layout} must carry the view's layout {expected}")


@irdl_op_definition
class SmemWindowOp(IRDLOperation):
    """Indices `start` .. `start + size` of one dim of a shared-memory buffer, every other dim
    whole: the leading dim (rows), or with `dim` the last one (columns).  The window is the
    contiguous bytes `start` × `unit_bytes` into the source: a buffer with a layout takes the
    windows its layout can express (`SmemLayout.window`), starting at a multiple of `step`
    indices (the interpreter checks a traced start); a plain row-major buffer, windows of rows."""

    name = "asyncdsl.smem_window"
    source = operand_def(MemRefType)
    start = operand_def(IndexType)
    size = prop_def(IntegerAttr[I64])
    dim = opt_prop_def(IntegerAttr[I64])  # absent: the leading dim
    result = result_def(MemRefType)

    assembly_format = ("$source `[` $start `size` $size (`dim` $dim^)? `]` attr-dict `:` type($source) `->` "
                       "type($result)")

    def __init__(self, source: SSAValue, start: SSAValue, size: int, dim: int = 0):
        source_type = memref_type(source.type)
        properties = {"size": int_prop(size)}
        if dim:
            properties["dim"] = int_prop(dim)
        super().__init__(operands=[source, start], properties=properties,
                         result_types=[_window_type(source_type, size, dim)])

    @property
    def axis(self) -> int:
        """The windowed dim of the source."""
        return 0 if self.dim is None else self.dim.value.data

    @property
    def extent(self) -> int:
        """The source's indices along the windowed dim (logical)."""
        return logical_shape(self.source.type)[self.axis]

    @property
    def unit_bytes(self) -> int:
        """The bytes one index of the windowed dim spans (every other dim whole)."""
        return buffer_bytes(self.source.type) // self.extent

    @property
    def step(self) -> int:
        """The indices the window's start is a multiple of."""
        layout = smem_layout(self.source.type)
        return 1 if layout is None else layout.window_step(element_bits(self.source.type) // 8, self.axis)

    def verify_(self) -> None:
        if not is_smem(self.source.type):
            raise VerifyException("smem_window takes a shared-memory buffer")
        try:
            expected = _window_type(memref_type(self.source.type), self.size.value.data, self.axis)
        except TransformError as error:
            raise VerifyException(f"smem_window: {error.message}") from None
        if self.result.type != expected:
            raise VerifyException(f"smem_window of {self.source.type} must give {expected}")


def _window_type(source: MemRefType, size: int, dim: int = 0) -> MemRefType:
    """The type of a window of `size` indices of `dim` of a buffer of type `source`."""
    shape = logical_shape(source)
    layout = smem_layout(source)
    if dim not in (0, len(shape) - 1) or (dim and layout is None):
        raise TransformError(f"a window of dim {dim} of {shape}: windows are of the leading dim, or of the "
                             f"last where a layout lays that out in blocks")
    if not 0 < size <= shape[dim]:
        raise TransformError(f"a window of {size} of the {shape[dim]} indices of dim {dim}")
    if len(shape) == 1 or math.prod(shape) // shape[dim] * element_bits(source) % 8:
        raise TransformError(f"a window's units must be whole bytes; those of dim {dim} of {shape}, elements "
                             f"of {element_bits(source)} bits, are not")
    window = list(shape)
    window[dim] = size
    if layout is None:
        return smem_type(tuple(window), source.element_type)
    laid = layout.window(size, dim)
    return smem_type(laid.physical_shape, source.element_type, laid)


OPERATIONS: tuple[type[Operation], ...] = (
    ProgramIdOp, NumProgramsOp, ClusterCtaIdOp, ClusterIdOp, WarpgroupIdxOp, AllocSmemOp, SmemViewOp,
    SmemWindowOp,
)
