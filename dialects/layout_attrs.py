"""The register layout of a tile in the IR: `#asyncdsl.layout<...>`, a layout of `hw.fragments`.

    #asyncdsl.layout<wgmma>          #asyncdsl.layout<wgmma_row>    (and wgmma_col, wgmma_transposed)
    #asyncdsl.layout<splat>          #asyncdsl.layout<"strided 4">
    #asyncdsl.layout<"tiled [[64], [16], [8], [1]] warps [-4] lanes [-2, r4] vector -1">

The attribute holds the layout's text; it verifies by building the layout, so the IR accepts
exactly the layouts the algebra does (`rN` is `Replicated(N)`).  Ops that make a register tile
carry the layout they were given (`layout`), and `infer-layouts` records every tile's layout as
the discardable attribute `asyncdsl.layout` of the op that makes it.
"""

from __future__ import annotations

import functools
import re

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue
from xdsl.irdl import IRDLOperation, irdl_attr_definition, opt_prop_def
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from asyncdsl.errors import LayoutError
from asyncdsl.hw.fragments import NAMED_LAYOUTS, Layout, SplatLayout, StridedLayout, TiledLayout
from asyncdsl.hw.tiling import Replicated, Tiling

INFERRED = "asyncdsl.layout"  # the discardable attribute infer-layouts puts on each tile's maker


def layout_text(layout: Layout) -> str:
    """The text of `layout` inside `#asyncdsl.layout<...>`."""
    if isinstance(layout, SplatLayout):
        return "splat"
    if isinstance(layout, StridedLayout):
        return f"strided {layout.vec}"
    for name, named in NAMED_LAYOUTS.items():
        if layout == named:
            return name

    def entries(listed) -> str:
        return "[" + ", ".join(f"r{e.times}" if isinstance(e, Replicated) else str(e) for e in listed) + "]"

    tiles = "[" + ", ".join("[" + ", ".join(map(str, tile)) + "]" for tile in layout.tiling.tiles) + "]"
    return (f"tiled {tiles} warps {entries(layout.warp_dims)} lanes {entries(layout.lane_dims)} vector "
            f"{layout.vector_dim}")


_TILED = re.compile(r"tiled (\[.*\]) warps (\[.*?\]) lanes (\[.*?\]) vector (-?\d+)")


@functools.lru_cache(maxsize=1024)
def layout_from_text(text: str) -> Layout:
    """The layout `layout_text` printed as `text` (LayoutError if it is none).  Remembered: a
    layout is immutable, and the passes and the interpreter ask for the same few again and again."""
    text = text.strip()
    if text in NAMED_LAYOUTS:
        return NAMED_LAYOUTS[text]
    if text == "splat":
        return SplatLayout()
    if text.startswith("strided "):
        return StridedLayout(_integer(text[len("strided ") :]))
    match = _TILED.fullmatch(text)
    if match is None:
        raise LayoutError(f"not a register layout: {text!r}")
    tiles = tuple(tuple(_integer(n) for n in _items(tile))
                  for tile in re.findall(r"\[([^\[\]]*)\]", match.group(1)))
    return TiledLayout(Tiling(tiles), _entries(match.group(2)), _entries(match.group(3)),
                       _integer(match.group(4)))


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise LayoutError(f"expected an integer in a register layout, got {text!r}") from None


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _entries(text: str) -> tuple:
    return tuple(Replicated(_integer(item[1:])) if item.startswith("r") else _integer(item)
                 for item in _items(text.strip("[]")))


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """`#asyncdsl.layout<...>`: one register layout."""

    name = "asyncdsl.layout"

    text: StringAttr

    def __init__(self, layout: Layout):
        super().__init__(StringAttr(layout_text(layout)))

    @property
    def layout(self) -> Layout:
        return layout_from_text(self.text.data)

    def verify(self) -> None:
        try:
            self.layout
        except LayoutError as error:
            raise VerifyException(f"#asyncdsl.layout: {error.message}") from None

    def print_parameters(self, printer: Printer) -> None:
        # A name alone where the layout has one; the full text quoted otherwise.
        text = self.text.data
        printer.print_string(f"<{text}>" if text.isidentifier() else f'<"{text}">')

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[StringAttr]:
        with parser.in_angle_brackets():
            text = parser.parse_optional_identifier() or parser.parse_str_literal()
        try:
            layout_from_text(text)
        except LayoutError as error:
            parser.raise_error(error.message)
        return (StringAttr(text),)


class GivenLayout(IRDLOperation):
    """An op that makes a tile (or a register ref) in the register layout `layout` where the user
    gave one (`layout_props`), else in the one infer-layouts picks."""

    layout = opt_prop_def(LayoutAttr)


def layout_props(layout: Layout | None) -> dict[str, LayoutAttr]:
    """An op's optional `layout` property: the user's layout where one was given, else none
    (infer-layouts chooses)."""
    return {"layout": LayoutAttr(layout)} if layout is not None else {}


def layout_of(value: SSAValue) -> Layout | None:
    """The layout infer-layouts recorded for the tile `value` (None before it ran)."""
    owner = value.owner
    if isinstance(owner, Operation):
        attr = owner.attributes.get(INFERRED)
        if isinstance(attr, LayoutAttr):
            return attr.layout
    return None


def inferred_layout(value: SSAValue) -> Layout:
    """The layout of the tile `value`, for the passes after infer-layouts, which gives every tile
    one."""
    layout = layout_of(value)
    if layout is None:
        raise RuntimeError(f"{value} has no layout: infer-layouts must run first")
    return layout


ATTRIBUTES: tuple[type[Attribute], ...] = (LayoutAttr,)
