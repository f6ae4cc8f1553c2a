"""IR attributes for the memref transforms of `asyncdsl.hw.transforms`.

```
#asyncdsl.tile<[64, 32]>            #asyncdsl.tile<[64, 32], down>
#asyncdsl.transpose<[1, 0, 2]>
#asyncdsl.collapse<[4096, 64]>      #asyncdsl.collapse<[4096, 64], batch_rank = 1>
#asyncdsl.drop_unit_dims<[0, 2]>
```

Each attribute verifies by building its transform, so the IR accepts exactly the transforms the
algebra accepts, with the same error messages.  `transform_attr` and `transform_from_attr`
convert between the two (the algebra itself, `asyncdsl.hw.transforms`, knows nothing of the IR).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, NoneAttr, StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from asyncdsl.errors import TransformError
from asyncdsl.hw.transforms import CollapseLeadingIndicesTransform, DropUnitDimsTransform, MemRefTransform
from asyncdsl.hw.transforms import Rounding, TileTransform, TransposeTransform


def _int_array(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr(IntAttr(v) for v in values)


def _ints(array: ArrayAttr[IntAttr]) -> tuple[int, ...]:
    return tuple(v.data for v in array.data)


def _parse_int_list(parser: AttrParser) -> ArrayAttr[IntAttr]:
    return _int_array(
        parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
        )
    )


def _print_int_list(printer: Printer, values: tuple[int, ...]) -> None:
    printer.print_string(f"[{', '.join(map(str, values))}]")


class TransformAttr(ParametrizedAttribute, ABC):
    """Base of the transform attributes: one is valid iff its transform can be built."""

    @abstractmethod
    def to_transform(self) -> MemRefTransform:
        """The transform this attribute stands for."""

    def verify(self) -> None:
        try:
            self.to_transform()
        except TransformError as error:
            raise VerifyException(f"{self.name}: {error.message}") from None


class IntListTransformAttr(TransformAttr, ABC):
    """Base of the transform attributes whose only parameter is a list of integers, `<[...]>`: the
    one argument of their transform, of class `TRANSFORM`.  They are built from that list as an
    `ArrayAttr` of `IntAttr`s."""

    TRANSFORM: ClassVar[type[TransposeTransform | DropUnitDimsTransform]]

    @property
    def values(self) -> tuple[int, ...]:
        (values,) = self.parameters
        assert isinstance(values, ArrayAttr)
        return _ints(values)

    def to_transform(self) -> MemRefTransform:
        return self.TRANSFORM(self.values)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (_parse_int_list(parser),)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            _print_int_list(printer, self.values)


@irdl_attr_definition
class TransposeTransformAttr(IntListTransformAttr):
    """`#asyncdsl.transpose<[permutation...]>`."""

    name = "asyncdsl.transpose"

    TRANSFORM = TransposeTransform

    permutation: ArrayAttr[IntAttr]


@irdl_attr_definition
class DropUnitDimsTransformAttr(IntListTransformAttr):
    """`#asyncdsl.drop_unit_dims<[dims...]>`."""

    name = "asyncdsl.drop_unit_dims"

    TRANSFORM = DropUnitDimsTransform

    unit_dims: ArrayAttr[IntAttr]


@irdl_attr_definition
class TileTransformAttr(TransformAttr):
    """`#asyncdsl.tile<[tiles...]>` or `#asyncdsl.tile<[tiles...], down>`."""

    name = "asyncdsl.tile"

    tiling: ArrayAttr[IntAttr]
    rounding: StringAttr | NoneAttr

    def __init__(self, tiling: Sequence[int], rounding: str | None = None):
        super().__init__(_int_array(tiling), StringAttr(rounding) if rounding else NoneAttr())

    def to_transform(self) -> MemRefTransform:
        rounding = None
        if isinstance(self.rounding, StringAttr):
            try:
                rounding = Rounding(self.rounding.data)
            except ValueError:
                raise TransformError(
                    f"unknown rounding {self.rounding.data!r}; expected 'down'"
                ) from None
        return TileTransform(_ints(self.tiling), rounding)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            tiling = _parse_int_list(parser)
            rounding: StringAttr | NoneAttr = NoneAttr()
            if parser.parse_optional_punctuation(",") is not None:
                rounding = StringAttr(parser.parse_identifier(context_msg=" (a rounding mode)"))
        return (tiling, rounding)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            _print_int_list(printer, _ints(self.tiling))
            if isinstance(self.rounding, StringAttr):
                printer.print_string(f", {self.rounding.data}")


@irdl_attr_definition
class CollapseTransformAttr(TransformAttr):
    """`#asyncdsl.collapse<[strides...]>`, with `, batch_rank = k` when batched."""

    name = "asyncdsl.collapse"

    strides: ArrayAttr[IntAttr]
    batch_rank: IntAttr

    def __init__(self, strides: Sequence[int], batch_rank: int = 0):
        super().__init__(_int_array(strides), IntAttr(batch_rank))

    def to_transform(self) -> MemRefTransform:
        return CollapseLeadingIndicesTransform(_ints(self.strides), self.batch_rank.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            strides = _parse_int_list(parser)
            batch_rank = 0
            if parser.parse_optional_punctuation(",") is not None:
                parser.parse_keyword("batch_rank")
                parser.parse_punctuation("=")
                batch_rank = parser.parse_integer(allow_negative=False)
        return (strides, IntAttr(batch_rank))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            _print_int_list(printer, _ints(self.strides))
            if self.batch_rank.data:
                printer.print_string(f", batch_rank = {self.batch_rank.data}")


TRANSFORM_ATTRS: tuple[type[TransformAttr], ...] = (
    TileTransformAttr,
    TransposeTransformAttr,
    CollapseTransformAttr,
    DropUnitDimsTransformAttr,
)

# For op definitions: `prop_def(ArrayAttr[AnyTransformAttr])` holds a transform chain.
AnyTransformAttr = (
    TileTransformAttr | TransposeTransformAttr | CollapseTransformAttr | DropUnitDimsTransformAttr
)


def transform_attr(transform: MemRefTransform) -> TransformAttr:
    """The IR attribute (`#asyncdsl....`) of `transform`."""
    if isinstance(transform, TileTransform):
        return TileTransformAttr(transform.tiling, transform.rounding.value if transform.rounding else None)
    if isinstance(transform, TransposeTransform):
        return TransposeTransformAttr(_int_array(transform.permutation))
    if isinstance(transform, CollapseLeadingIndicesTransform):
        return CollapseTransformAttr(transform.strides, transform.batch_rank)
    if isinstance(transform, DropUnitDimsTransform):
        return DropUnitDimsTransformAttr(_int_array(transform.unit_dims))
    raise TransformError(f"{transform!r} is not a memref transform asyncdsl can put in its IR")


def transform_from_attr(attr: Attribute) -> MemRefTransform:
    """The transform an `#asyncdsl.tile/transpose/collapse/drop_unit_dims` attribute stands for."""
    if not isinstance(attr, TRANSFORM_ATTRS):
        raise TransformError(f"{attr} is not a memref transform attribute")
    return attr.to_transform()
