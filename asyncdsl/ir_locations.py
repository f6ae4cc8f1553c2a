"""Carrying the user's source lines on IR ops (xDSL `FileLineColLoc`), so that passes can
report errors at the line that caused them."""

from __future__ import annotations

import functools

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr
from xdsl.ir import Operation

from asyncdsl.errors import SourceLocation


@functools.lru_cache(maxsize=4096)  # attributes are immutable: each traced op of a line can share it
def to_ir_location(location: SourceLocation) -> FileLineColLoc:
    return FileLineColLoc(StringAttr(location.file), IntAttr(location.line), IntAttr(location.column))


def from_ir_location(op: Operation) -> SourceLocation | None:
    """The user's source line `op` was traced from, if it carries one."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
    return None
