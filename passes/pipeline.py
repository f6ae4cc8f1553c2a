"""The default pass pipeline, in order.

    resolve-transforms            user copies -> hardware copies (TMA boxes, coordinates, checks)
    partition-collectives         collective copies -> per-CTA slices + multicast masks
    allocate-smem                 static offsets for buffers and barriers, budget check
    allocate-descriptor-scratch   number descriptors; by-value params or a GMEM scratch
    lower-to-ptx                  everything -> `ptx.kernel`, printed by `print_ptx`

The interpreter runs the module as it stands after the first four (`ASYNC_PASSES`), which is the
IR the GPU's PTX is printed from.
"""

from __future__ import annotations

from xdsl.passes import ModulePass

from asyncdsl.passes.allocate_descriptor_scratch import AllocateDescriptorScratch
from asyncdsl.passes.allocate_smem import AllocateSmem
from asyncdsl.passes.lower_to_ptx import LowerToPtx
from asyncdsl.passes.partition_collectives import PartitionCollectives
from asyncdsl.passes.resolve_transforms import ResolveTransforms


def async_passes(descriptor_mode: str = "grid_constant") -> tuple[ModulePass, ...]:
    """The passes that keep the IR in the `asyncdsl` dialect."""
    return (
        ResolveTransforms(),
        PartitionCollectives(),
        AllocateSmem(),
        AllocateDescriptorScratch(mode=descriptor_mode),
    )


def default_pipeline(descriptor_mode: str = "grid_constant") -> tuple[ModulePass, ...]:
    return (*async_passes(descriptor_mode), LowerToPtx())


PASS_NAMES = tuple(p.name for p in default_pipeline())
