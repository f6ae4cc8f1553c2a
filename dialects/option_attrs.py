"""The options of copies and kernels as IR attributes, mirroring the enums of `asyncdsl.hw.options`.

    #asyncdsl<implementation cp_async>    #asyncdsl<oob promise_in_bounds>
    #asyncdsl<reduction smin>             #asyncdsl<partition replicated>
    #asyncdsl<arch sm_100a>               #asyncdsl<eviction evict_first>

An attribute holds a member of its enum, which compares equal to its string, so passes read
`op.oob.data == Oob.UNDEFINED` (or the plain string).  A value outside the enum cannot be built
or parsed: the frontend turns the user's strings into members first (`frontend/options.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition

from asyncdsl.hw.options import Arch, Comparison, Eviction, Implementation, Oob, Partition, Reduction
from asyncdsl.hw.options import TileReduction


# xDSL bounds EnumAttribute's parameter by its own `StrEnum` class, which predates Python's; these
# enums are Python's `enum.StrEnum`, which xDSL handles alike (it only reads their values), hence
# the `type-var` ignores below.
@irdl_attr_definition
class ImplementationAttr(EnumAttribute[Implementation], SpacedOpaqueSyntaxAttribute):  # type: ignore[type-var]
    name = "asyncdsl.implementation"


@irdl_attr_definition
class OobAttr(EnumAttribute[Oob], SpacedOpaqueSyntaxAttribute):  # type: ignore[type-var]
    name = "asyncdsl.oob"


@irdl_attr_definition
class EvictionAttr(EnumAttribute[Eviction], SpacedOpaqueSyntaxAttribute):  # type: ignore[type-var]
    name = "asyncdsl.eviction"


class _CarriesEviction(Protocol):
    """An op with an optional L2 eviction policy (a copy, a TMA load)."""

    @property
    def eviction(self) -> EvictionAttr | None: ...


def eviction_of(op: _CarriesEviction) -> Eviction | None:
    """The L2 eviction policy a copy or load op carries (None: the default), for the ops a pass
    rewrites it into to carry on."""
    return op.eviction.data if op.eviction is not None else None


@irdl_attr_definition
class ReductionAttr(EnumAttribute[Reduction], SpacedOpaqueSyntaxAttribute):  # type: ignore[type-var]
    name = "asyncdsl.reduction"


@irdl_attr_definition
class PartitionAttr(EnumAttribute[Partition], SpacedOpaqueSyntaxAttribute):  # type: ignore[type-var]
    name = "asyncdsl.partition"


@irdl_attr_definition
class TileReductionAttr(EnumAttribute[TileReduction], SpacedOpaqueSyntaxAttribute):  # type: ignore[type-var]
    name = "asyncdsl.tile_reduction"


@irdl_attr_definition
class ComparisonAttr(EnumAttribute[Comparison], SpacedOpaqueSyntaxAttribute):  # type: ignore[type-var]
    name = "asyncdsl.comparison"


@irdl_attr_definition
class ArchAttr(EnumAttribute[Arch], SpacedOpaqueSyntaxAttribute):  # type: ignore[type-var]
    name = "asyncdsl.arch"


# The copy options an op may leave out, by their property name, each with its attribute.
_OPTIONAL_COPY_OPTIONS: dict[str, Callable[[str], Attribute]] = {
    "partition": lambda value: PartitionAttr(Partition(value)),
    "reduction": lambda value: ReductionAttr(Reduction(value)),
    "eviction": lambda value: EvictionAttr(Eviction(value)),
}


def optional_copy_options(**options: str | None) -> dict[str, Attribute]:
    """The properties of the optional copy options given (`partition`, `reduction`, `eviction`),
    in the order given; an option that is None is left out, as the op's optional property."""
    return {name: _OPTIONAL_COPY_OPTIONS[name](value) for name, value in options.items() if value is not None}


ATTRIBUTES: tuple[type[Attribute], ...] = (
    ImplementationAttr, OobAttr, EvictionAttr, ReductionAttr, PartitionAttr, TileReductionAttr,
    ComparisonAttr, ArchAttr,
)
