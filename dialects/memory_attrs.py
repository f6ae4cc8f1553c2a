"""Types and attributes of the `asyncdsl` dialect (the ops are in `asyncdsl.py`).

- `#asyncdsl.smem`: the memory space of shared-memory buffers (`memref<64x64xf32, #asyncdsl.smem>`);
  GMEM refs are plain row-major memrefs.
- `!asyncdsl.barriers<N>`: N mbarriers allocated together (indexed by barrier ops).
- `#asyncdsl.tma_desc<...>`: the host encoding of one tiled TMA descriptor, in array order.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from asyncdsl.dialects.descriptor_attrs import DescriptorAttr, DescriptorField
from asyncdsl.kernel_binary import TiledTensorMapSpec


@irdl_attr_definition
class SharedMemorySpaceAttr(ParametrizedAttribute):
    """Marks a memref as living in the CTA's shared memory."""

    name = "asyncdsl.smem"


SMEM = SharedMemorySpaceAttr()


@irdl_attr_definition
class BarriersType(ParametrizedAttribute, TypeAttribute):
    """A group of `count` mbarriers in shared memory, allocated and initialised together."""

    name = "asyncdsl.barriers"

    count: IntAttr

    def __init__(self, count: int | IntAttr):
        super().__init__(count if isinstance(count, IntAttr) else IntAttr(count))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_int(self.count.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[IntAttr]:
        with parser.in_angle_brackets():
            return (IntAttr(parser.parse_integer()),)


# The keywords of `#asyncdsl.tma_desc`, one per `TiledTensorMapSpec` field, in printing order.
_TILED_FIELDS = (
    DescriptorField("arg", "arg_index"),
    DescriptorField("dtype", "dtype_code"),
    DescriptorField("elem_bytes", "element_bytes"),
    DescriptorField("dims", "global_dims", "ints"),
    DescriptorField("strides", "global_strides", "ints"),
    DescriptorField("box", "box_dims", "ints"),
    DescriptorField("elem_strides", "element_strides", "ints"),
    DescriptorField("swizzle", "swizzle_bytes"),
    DescriptorField("oob_nan", "oob_nan", "flag"),
    DescriptorField("l2_promotion", "l2_promotion_bytes"),
    DescriptorField("offset", "base_offset_bytes"),
)


@irdl_attr_definition
class TmaDescriptorAttr(DescriptorAttr):
    """One tiled TMA descriptor as the host will encode it (see `TiledTensorMapSpec`).

    Printed with keywords so that the IR says what the hardware is told:
    `#asyncdsl.tma_desc<arg = 0, dtype = 7, elem_bytes = 4, dims = [256, 192], ...>`.
    """

    name = "asyncdsl.tma_desc"
    SPEC = TiledTensorMapSpec
    FIELDS = _TILED_FIELDS

    arg_index: IntAttr
    dtype_code: IntAttr
    element_bytes: IntAttr
    global_dims: ArrayAttr[IntAttr]
    global_strides: ArrayAttr[IntAttr]
    box_dims: ArrayAttr[IntAttr]
    element_strides: ArrayAttr[IntAttr]
    swizzle_bytes: IntAttr
    oob_nan: IntAttr
    l2_promotion_bytes: IntAttr
    base_offset_bytes: IntAttr


ATTRIBUTES = (SharedMemorySpaceAttr, BarriersType, TmaDescriptorAttr)
