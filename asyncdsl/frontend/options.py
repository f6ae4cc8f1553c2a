"""The user's option strings (`oob="undefined"`, `reduction="min"`, `arch="sm_100a"`) as the typed
options of `asyncdsl.hw`, with an error naming the allowed values when one is not."""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from asyncdsl.errors import AsyncDSLError, TraceError, user_location

Option = TypeVar("Option", bound=StrEnum)


def option(kind: type[Option], value: object, what: str, error: type[AsyncDSLError] = TraceError, location=None) -> Option:
    """`value` as a member of `kind` (its string or the member itself), or `error` at the user's line."""
    try:
        return kind(value)
    except ValueError:
        allowed = tuple(str(member) for member in kind)
        raise error(f"{what} must be one of {allowed}, got {value!r}", location or user_location()) from None
