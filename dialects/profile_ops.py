"""Profiler regions: where a warpgroup enters and leaves a named region of a profiled kernel.

    asyncdsl.region_begin "wait full"
    ...
    asyncdsl.region_end "wait full"

`with asyncdsl.region(name):` traces these two markers around its body, and only when the kernel is
traced for profiling (`Kernel.profile`); otherwise it traces nothing.  They are markers, not an op
with a body: values made inside a region stay usable after it, so turning profiling on never
changes what a kernel may write.  The frontend places a begin and its end in the same block, and
Python's `with` nests them.  The lowering (`passes/to_ptx/profile.py`) stamps the SM cycle counter
into the kernel's profile buffer; the interpreter stamps its logical clock.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def
from xdsl.utils.exceptions import VerifyException


class _RegionMarker(IRDLOperation):
    region = prop_def(StringAttr)

    assembly_format = "$region attr-dict"

    def __init__(self, region: str):
        super().__init__(properties={"region": StringAttr(region)})

    def verify_(self) -> None:
        if not self.region.data:
            raise VerifyException("a profiler region needs a non-empty name")


@irdl_op_definition
class RegionBeginOp(_RegionMarker):
    """The warpgroup enters region `region`."""

    name = "asyncdsl.region_begin"


@irdl_op_definition
class RegionEndOp(_RegionMarker):
    """The warpgroup leaves region `region`."""

    name = "asyncdsl.region_end"


def region_names(fn: func.FuncOp) -> tuple[str, ...]:
    """The kernel's region names, each once, in the order they first appear: name i is what
    events tag with region number i (the lowering and the interpreter both number them so)."""
    names: dict[str, None] = {}
    for op in fn.walk():
        if isinstance(op, RegionBeginOp):
            names.setdefault(op.region.data)
    return tuple(names)


OPERATIONS: tuple[type[Operation], ...] = (RegionBeginOp, RegionEndOp)
