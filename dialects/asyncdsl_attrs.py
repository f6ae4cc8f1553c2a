"""Types and attributes of the `asyncdsl` dialect (the ops are in `asyncdsl.py`).

- `#asyncdsl.smem`: the memory space of shared-memory buffers (`memref<64x64xf32, #asyncdsl.smem>`);
  GMEM refs are plain row-major memrefs.
- `!asyncdsl.barriers<N>`: N mbarriers allocated together (indexed by barrier ops).
- `#asyncdsl.tma_desc<...>`: the host encoding of one tiled TMA descriptor, in array order.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

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


def _int_array(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr(IntAttr(int(v)) for v in values)


def _parse_ints(parser: AttrParser) -> tuple[int, ...]:
    return tuple(parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer))


# (keyword, TiledTensorMapSpec field, is a list) in printing order.
_DESC_FIELDS = (
    ("arg", "arg_index", False),
    ("dtype", "dtype_code", False),
    ("elem_bytes", "element_bytes", False),
    ("dims", "global_dims", True),
    ("strides", "global_strides", True),
    ("box", "box_dims", True),
    ("elem_strides", "element_strides", True),
    ("swizzle", "swizzle_bytes", False),
    ("oob_nan", "oob_nan", False),
    ("l2_promotion", "l2_promotion_bytes", False),
    ("offset", "base_offset_bytes", False),
)


@irdl_attr_definition
class TmaDescriptorAttr(ParametrizedAttribute):
    """One tiled TMA descriptor as the host will encode it (see `TiledTensorMapSpec`).

    Printed with keywords so that the IR says what the hardware is told:
    `#asyncdsl.tma_desc<arg = 0, dtype = 7, elem_bytes = 4, dims = [256, 192], ...>`.
    """

    name = "asyncdsl.tma_desc"

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

    @staticmethod
    def from_spec(spec: TiledTensorMapSpec) -> TmaDescriptorAttr:
        values = []
        for _, field, is_list in _DESC_FIELDS:
            value = getattr(spec, field)
            values.append(_int_array(value) if is_list else IntAttr(int(value)))
        return TmaDescriptorAttr(*values)

    def spec(self) -> TiledTensorMapSpec:
        kwargs = {}
        for _, field, is_list in _DESC_FIELDS:
            value = getattr(self, field)
            kwargs[field] = tuple(v.data for v in value) if is_list else value.data
        kwargs["oob_nan"] = bool(kwargs["oob_nan"])
        return TiledTensorMapSpec(**kwargs)

    def print_parameters(self, printer: Printer) -> None:
        parts = []
        for keyword, field, is_list in _DESC_FIELDS:
            value = getattr(self, field)
            text = "[" + ", ".join(map(str, [v.data for v in value])) + "]" if is_list else str(value.data)
            parts.append(f"{keyword} = {text}")
        printer.print_string("<" + ", ".join(parts) + ">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list:
        values = []
        with parser.in_angle_brackets():
            for position, (keyword, _, is_list) in enumerate(_DESC_FIELDS):
                if position:
                    parser.parse_punctuation(",")
                parser.parse_keyword(keyword)
                parser.parse_punctuation("=")
                values.append(_int_array(_parse_ints(parser)) if is_list else IntAttr(parser.parse_integer()))
        return values


ATTRIBUTES = (SharedMemorySpaceAttr, BarriersType, TmaDescriptorAttr)
