"""`allocate-descriptor-scratch`: number the kernel's TMA descriptors and decide where they live.

Expects: TMA copies resolved (each hardware copy op, `asyncdsl.tma_load`/`tma_store` and the
like, carries the descriptor the host must encode in its `descriptor` property).
Guarantees: identical descriptors (same argument, view, box, swizzle, ...) share one number,
`descriptor_index`; the kernel lists them in `asyncdsl.descriptors` in that order, says whether
they travel as by-value kernel parameters (`grid_constant`, the default) or in a GMEM scratch
buffer the host fills before launch (`scratch`: 128-byte slots at 64-byte alignment, offsets in
`asyncdsl.descriptor_slots`).

Example: two loads of the same tile shape from argument 0 and one store to argument 1 give

    func.func @k(...) attributes {asyncdsl.descriptor_mode = "grid_constant",
        asyncdsl.descriptors = [#asyncdsl.tma_desc<arg = 0, ...>, #asyncdsl.tma_desc<arg = 1, ...>]}
    "asyncdsl.tma_load"(...) <{descriptor_index = 0 : i64, ...}>   (both loads)
    "asyncdsl.tma_store"(...) <{descriptor_index = 1 : i64, ...}>
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass

from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.hw.limits import DESCRIPTOR_BYTES
from asyncdsl.hw.options import DESCRIPTOR_MODES as MODES


@dataclass(frozen=True)
class AllocateDescriptorScratch(ModulePass):
    name = "allocate-descriptor-scratch"

    mode: str = "grid_constant"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mode not in MODES:
            raise ValueError(f"descriptor mode must be one of {MODES}, got {self.mode!r}")
        for fn in attrs.kernels(op):
            numbered: dict = {}
            for copy in fn.walk():
                if "descriptor" in copy.properties:
                    index = numbered.setdefault(copy.descriptor, len(numbered))
                    copy.properties["descriptor_index"] = IntegerAttr(index, i64)
            fn.attributes[attrs.DESCRIPTORS] = ArrayAttr(list(numbered))
            fn.attributes[attrs.DESCRIPTOR_MODE] = StringAttr(self.mode)
            if self.mode == "scratch":
                slots = [i * DESCRIPTOR_BYTES for i in range(len(numbered))]
                fn.attributes[attrs.DESCRIPTOR_SLOTS] = DenseArrayBase.from_list(i64, slots)
