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
from xdsl.parser import AttrParser
from xdsl.printer import Printer


class DescriptorField(NamedTuple):
    """One spec field: the keyword the IR prints, the field's name (also the attribute
    parameter's name), and how it is held: one integer, a list of them, or a flag kept as 0/1."""

    keyword: str
    name: str
    kind: Literal["int", "ints", "flag"] = "int"


class DescriptorAttr(ParametrizedAttribute):
    """Base of the descriptor attributes; a subclass sets `SPEC` and `FIELDS` (in printing order)."""

    SPEC: ClassVar[type]
    FIELDS: ClassVar[tuple[DescriptorField, ...]]

    @classmethod
    def from_spec(cls, spec: Any) -> Any:
        values: list[Attribute] = []
        for field in cls.FIELDS:
            value = getattr(spec, field.name)
            values.append(ArrayAttr(IntAttr(int(v)) for v in value) if field.kind == "ints" else IntAttr(int(value)))
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
            text = "[" + ", ".join(str(v.data) for v in value) + "]" if field.kind == "ints" else str(value.data)
            parts.append(f"{field.keyword} = {text}")
        printer.print_string("<" + ", ".join(parts) + ">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        values: list[Attribute] = []
        with parser.in_angle_brackets():
            for position, field in enumerate(cls.FIELDS):
                if position:
                    parser.parse_punctuation(",")
                parser.parse_keyword(field.keyword)
                parser.parse_punctuation("=")
                if field.kind == "ints":
                    ints = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
                    values.append(ArrayAttr(IntAttr(v) for v in ints))
                else:
                    values.append(IntAttr(parser.parse_integer()))
        return values
