"""The memory space and barrier type of the `asyncdsl` dialect.

- `#asyncdsl.smem`: the memory space of shared-memory buffers (`memref<64x64xf32, #asyncdsl.smem>`);
  GMEM refs are plain row-major memrefs.
- `!asyncdsl.barriers<N>`: N mbarriers allocated together (indexed by barrier ops).
- `!asyncdsl.registers<vector<...>>`: a mutable register tile (`asyncdsl.registers`): the same
  registers through every write, so its value crosses loops and branches without copies.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr, VectorType
from xdsl.ir import ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer


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


@irdl_attr_definition
class RegistersType(ParametrizedAttribute, TypeAttribute):
    """A warpgroup's mutable register tile holding values of type `tile`."""

    name = "asyncdsl.registers"

    tile: VectorType

    def __init__(self, tile: VectorType):
        super().__init__(tile)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.tile)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[VectorType]:
        with parser.in_angle_brackets():
            tile = parser.parse_type()
        if not isinstance(tile, VectorType):
            parser.raise_error(f"!asyncdsl.registers holds a vector type, got {tile}")
        return (tile,)


ATTRIBUTES = (SharedMemorySpaceAttr, BarriersType, RegistersType)
