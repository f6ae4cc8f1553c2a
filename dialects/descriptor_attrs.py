"""Descriptor attributes: IR attributes that mirror a host-side tensor-map spec field by field.

A TMA descriptor in the IR says exactly what the host will encode, so its attribute has one
parameter per field of the spec dataclass (`TiledTensorMapSpec`, `Im2colTensorMapSpec`) and
prints them with keywords, in the spec's order:
`#asyncdsl.tma_desc<arg = 0, dtype = 7, elem_bytes = 4, dims = [256, 192], ...>`.
A subclass names its spec type and its field table; conversion, printing and parsing follow.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, NamedTuple

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from asyncdsl.kernel_binary import TiledTensorMapSpec


class DescriptorField(NamedTuple):
    """One spec field: the keyword the IR prints, the field's name (also the attribute
    parameter's name), and how it is held: one integer, a list of them, or a flag kept as 0/1.
    A field with a `default` comes after those without; it is printed only when it differs
    from it, so the common case reads as before."""

    keyword: str
    name: str
    kind: Literal["int", "ints", "flag"] = "int"
    default: int | None = None


class DescriptorAttr(ParametrizedAttribute):
    """Base of the descriptor attributes; a subclass sets `SPEC` and `FIELDS` (in printing order)."""

    SPEC: ClassVar[type]
    FIELDS: ClassVar[tuple[DescriptorField, ...]]

    @classmethod
    def from_spec(cls, spec: Any) -> Any:
        values: list[Attribute] = []
        for field in cls.FIELDS:
            value = getattr(spec, field.name)
            values.append(ArrayAttr(IntAttr(int(v)) for v in value) if field.kind == "ints"
                          else IntAttr(int(value)))
        return cls(*values)

    def spec(self) -> Any:
        kwargs: dict[str, Any] = {}
        for field in self.FIELDS:
            value = getattr(self, field.name)
            if field.kind == "ints":
                kwargs[field.name] = tuple(v.data for v in value)
            elif field.kind == "flag":
                kwargs[field.name] = bool(value.data)
            else:
                kwargs[field.name] = value.data
        return self.SPEC(**kwargs)

    def print_parameters(self, printer: Printer) -> None:
        parts = []
        for field in self.FIELDS:
            value = getattr(self, field.name)
            if field.default is not None and value.data == field.default:
                continue
            text = ("[" + ", ".join(str(v.data) for v in value) + "]" if field.kind == "ints"
                    else str(value.data))
            parts.append(f"{field.keyword} = {text}")
        printer.print_string("<" + ", ".join(parts) + ">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        values: list[Attribute] = []
        with parser.in_angle_brackets():
            for position, field in enumerate(cls.FIELDS):
                if field.default is not None:
                    if parser.parse_optional_punctuation(",") is None:
                        values.append(IntAttr(field.default))
                        continue
                elif position:
                    parser.parse_punctuation(",")
                parser.parse_keyword(field.keyword)
                parser.parse_punctuation("=")
                if field.kind == "ints":
                    ints = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
                    values.append(ArrayAttr(IntAttr(v) for v in ints))
                else:
                    values.append(IntAttr(parser.parse_integer()))
        return values


# The keywords both kinds of tensor map share: the global tensor they describe (first) and how the
# box is read and laid out in SMEM (after the kind's own keywords).
TENSOR_FIELDS = (
    DescriptorField("arg", "arg_index"),
    DescriptorField("dtype", "dtype_code"),
    DescriptorField("elem_bytes", "element_bytes"),
    DescriptorField("dims", "global_dims", "ints"),
    DescriptorField("strides", "global_strides", "ints"),
)
BOX_ENCODING_FIELDS = (
    DescriptorField("elem_strides", "element_strides", "ints"),
    DescriptorField("swizzle", "swizzle_bytes"),
    DescriptorField("oob_nan", "oob_nan", "flag"),
    DescriptorField("l2_promotion", "l2_promotion_bytes"),
    DescriptorField("offset", "base_offset_bytes"),
)

# The keywords of `#asyncdsl.tma_desc`, one per `TiledTensorMapSpec` field, in printing order.
_TILED_FIELDS = (
    *TENSOR_FIELDS,
    DescriptorField("box", "box_dims", "ints"),
    *BOX_ENCODING_FIELDS,
    DescriptorField("peer", "peer", default=-1),
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
    peer: IntAttr


ATTRIBUTES: tuple[type[Attribute], ...] = (TmaDescriptorAttr,)
