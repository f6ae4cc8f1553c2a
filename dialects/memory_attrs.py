"""The memory space and barrier type of the `asyncdsl` dialect.

- `#asyncdsl.smem`: the memory space of shared-memory buffers (`memref<64x64xf32, #asyncdsl.smem>`);
  GMEM refs are plain row-major memrefs.  A buffer allocated with a layout carries it in its
  memory space, logical shape, transforms and swizzle, while the memref's shape is the physical
  one the memory holds (`hw.smem_layout`):
  `memref<16x1x8x64xbf16, #asyncdsl.smem<[128, 64], [#asyncdsl.tile<[8, 64]>], swizzle = 128>>`.
- `!asyncdsl.barriers<N>`: N mbarriers allocated together (indexed by barrier ops).
- `!asyncdsl.registers<vector<...>>`: a mutable register tile (`asyncdsl.registers`): the same
  registers through every write, so its value crosses loops and branches without copies.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntAttr, VectorType
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.transform_attrs import AnyTransformAttr, transform_attr, transform_from_attr
from asyncdsl.errors import TransformError
from asyncdsl.hw.smem_layout import SmemLayout


@irdl_attr_definition
class SharedMemorySpaceAttr(ParametrizedAttribute):
    """Marks a memref as living in the CTA's shared memory, with the buffer's layout when it
    has one (an empty logical shape: none, the memref is row-major as it stands)."""

    name = "asyncdsl.smem"

    logical_shape: ArrayAttr[IntAttr]
    transforms: ArrayAttr[AnyTransformAttr]
    swizzle_bytes: IntAttr

    def __init__(self, layout: SmemLayout | None = None):
        if layout is None:
            super().__init__(ArrayAttr(()), ArrayAttr(()), IntAttr(0))
            return
        super().__init__(
            ArrayAttr(IntAttr(d) for d in layout.logical_shape),
            ArrayAttr(transform_attr(t) for t in layout.transforms),
            IntAttr(layout.swizzle_bytes),
        )

    @property
    def layout(self) -> SmemLayout | None:
        if not self.logical_shape.data:
            return None
        return SmemLayout(
            tuple(d.data for d in self.logical_shape.data),
            tuple(transform_from_attr(t) for t in self.transforms.data),
            self.swizzle_bytes.data,
        )

    def verify(self) -> None:
        if not self.logical_shape.data:
            if self.transforms.data or self.swizzle_bytes.data:
                raise VerifyException(
                    "#asyncdsl.smem: transforms and swizzle need the logical shape they lay out")
            return
        try:
            self.layout
        except TransformError as error:
            raise VerifyException(f"#asyncdsl.smem: {error.message}") from None

    def print_parameters(self, printer: Printer) -> None:
        if not self.logical_shape.data:
            return
        with printer.in_angle_brackets():
            printer.print_string("[" + ", ".join(str(d.data) for d in self.logical_shape.data) + "], ")
            printer.print_attribute(self.transforms)
            printer.print_string(f", swizzle = {self.swizzle_bytes.data}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[ArrayAttr, ArrayAttr, IntAttr]:
        if parser.parse_optional_punctuation("<") is None:
            return ArrayAttr(()), ArrayAttr(()), IntAttr(0)
        shape = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False, allow_negative=False)
        )
        parser.parse_punctuation(",")
        transforms = parser.parse_attribute()
        parser.parse_punctuation(",")
        parser.parse_keyword("swizzle")
        parser.parse_punctuation("=")
        swizzle = parser.parse_integer(allow_boolean=False, allow_negative=False)
        parser.parse_punctuation(">")
        if not isinstance(transforms, ArrayAttr):
            parser.raise_error(f"#asyncdsl.smem lists its transforms in [...], got {transforms}")
        return ArrayAttr(IntAttr(d) for d in shape), transforms, IntAttr(swizzle)


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


ATTRIBUTES: tuple[type[Attribute], ...] = (SharedMemorySpaceAttr, BarriersType, RegistersType)
