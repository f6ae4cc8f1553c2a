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

A copy to or from a peer device's array (its `peer` operand set) gets one descriptor per device
of the kernel, numbered consecutively (`peer = 0`, `peer = 1`, ...; the host encodes each on the
address that device's copy of the argument is mapped at), and its `descriptor_index` is the
first: the lowering adds 128 bytes per device to that slot's address.  Such a kernel keeps its
descriptors in the scratch whatever the mode asked, since only there are they consecutive in
memory a traced device index can select from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass

from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.copy_bases import TmaDescribed
from asyncdsl.dialects.descriptor_attrs import DescriptorAttr
from asyncdsl.dialects.im2col_ops import TmaIm2colLoadOp
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
            numbered: dict[DescriptorAttr, int] = {}
            peer_groups: dict[DescriptorAttr, int] = {}
            for copy in fn.walk():
                if not isinstance(copy, (TmaDescribed, TmaIm2colLoadOp)):  # no tensor map
                    continue
                if getattr(copy, "peer", None) is None:
                    index = numbered.setdefault(copy.descriptor, len(numbered))
                elif copy.descriptor in peer_groups:
                    index = peer_groups[copy.descriptor]
                else:
                    index = peer_groups[copy.descriptor] = len(numbered)
                    for pe in range(attrs.devices(fn)):
                        numbered[_on_peer(copy.descriptor, pe)] = len(numbered)
                copy.properties["descriptor_index"] = IntegerAttr(index, i64)
            mode = "scratch" if peer_groups else self.mode
            fn.attributes[attrs.DESCRIPTORS] = ArrayAttr(list(numbered))
            fn.attributes[attrs.DESCRIPTOR_MODE] = StringAttr(mode)
            if mode == "scratch":
                slots = [i * DESCRIPTOR_BYTES for i in range(len(numbered))]
                fn.attributes[attrs.DESCRIPTOR_SLOTS] = DenseArrayBase.from_list(i64, slots)


def _on_peer(descriptor: DescriptorAttr, pe: int) -> DescriptorAttr:
    """`descriptor` (of an argument) as the host encodes it for device `pe`'s copy."""
    return type(descriptor).from_spec(replace(descriptor.spec(), peer=pe))
