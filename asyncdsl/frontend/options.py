"""The user's option arguments, checked where kernel code passes them: option strings
(`oob="undefined"`, `reduction="min"`, `arch="sm_100a"`) as the typed options of `asyncdsl.hw`,
and the other plain options of copies (`swizzle=`, `arrive=`, `transforms=`, `collective=`), each
with an error at the user's line naming what is allowed when it is not."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from enum import StrEnum
from typing import TypeVar

from asyncdsl.errors import AsyncDSLError, TraceError, user_location
from asyncdsl.hw.limits import SWIZZLE_SPANS
from asyncdsl.hw.transforms import MemRefTransform

Option = TypeVar("Option", bound=StrEnum)

NO_SWIZZLE = (None, 0, 16)  # what users may write for "no swizzle" (16 bytes is the unswizzled span)


def option(kind: type[Option], value: object, what: str, error: type[AsyncDSLError] = TraceError,
           location=None) -> Option:
    """`value` as a member of `kind` (its string or the member itself), or `error` at the user's line."""
    if isinstance(value, str):  # a member is its string too
        try:
            return kind(value)
        except ValueError:
            pass
    allowed = tuple(str(member) for member in kind)
    raise error(f"{what} must be one of {allowed}, got {value!r}", location or user_location())


def swizzle_bytes(value: object) -> int:
    """A copy's `swizzle=`: the swizzle span in bytes, 0 for none (None, 0 or 16)."""
    if value is None:
        return 0
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        number = int(value)
        if number in NO_SWIZZLE:
            return 0
        if number in SWIZZLE_SPANS:
            return number
    raise TraceError(
        "swizzle must be one of None, 0, 16 (no swizzle), 32, 64 or 128 (bytes, a Python int), "
        f"got {value!r}",
        user_location(),
    )


def flag(value: object, what: str) -> bool:
    """A yes/no option (`arrive=`): a Python bool, known while tracing."""
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):  # numpy's bool too
        return bool(value)
    raise TraceError(f"{what} must be True or False (a Python bool known while tracing), got {value!r}",
                     user_location())


def transform_chain(value: object) -> tuple[MemRefTransform, ...]:
    """`transforms=`: one asyncdsl transform or a sequence of them."""
    if isinstance(value, MemRefTransform):
        return (value,)
    if isinstance(value, Sequence) and not isinstance(value, str):
        for transform in value:
            if not isinstance(transform, MemRefTransform):
                raise TraceError(
                    f"transforms must be asyncdsl transforms (TileTransform, ...), got {transform!r}",
                    user_location()
                )
        return tuple(value)
    hint = " (an instance, e.g. TileTransform((8, 64)), not the class)" if isinstance(value, type) else ""
    raise TraceError(
        f"transforms must be an asyncdsl transform or a tuple of them{hint}, got {value!r}", user_location()
    )


def cluster_dims(value: object) -> tuple[str, ...]:
    """`collective=`: a cluster dim name ("x", "y", "z") or a sequence of them (None: none)."""
    if value is None:
        return ()
    names = (value,) if isinstance(value, str) else value
    if isinstance(names, Sequence) and all(isinstance(name, str) for name in names):
        return tuple(names)
    raise TraceError(
        f"collective must name cluster dims: 'x', 'y', 'z' or a tuple of them, got {value!r}", user_location()
    )
