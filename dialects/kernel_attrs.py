"""The attributes a kernel `func.func` carries, set by the frontend and by passes.

    asyncdsl.kernel            unit: this function is a kernel entry point
    asyncdsl.block             array<i64: x, y, z>: threads per CTA
    asyncdsl.cluster           array<i64: x, y, z>: CTAs per cluster
    asyncdsl.arg_names         the Python names of the arguments (arrays first, then runtime scalars)
    asyncdsl.arch              the target, #asyncdsl<arch sm_90a> (Hopper) or sm_100a (Blackwell)
    asyncdsl.smem_bytes        shared memory the kernel plans (allocate-smem)
    asyncdsl.descriptors       the TMA descriptors, numbered (allocate-descriptor-scratch)
    asyncdsl.descriptor_mode   "grid_constant" (by-value params) or "scratch" (GMEM buffer)
    asyncdsl.descriptor_slots  byte offset of each descriptor in the scratch
    asyncdsl.tile_scratch      array<i64: offset, bytes>: shared memory each warpgroup's register
                               tiles exchange data through (reductions across warps, relayouts)
    asyncdsl.debug             unit: check at run time what the compiler took on trust (ASYNCDSL_DEBUG)
    asyncdsl.profile           i64: traced for profiling, with room for this many region events
                               per warpgroup (`Kernel.profile`)
    asyncdsl.devices           i64: traced for this many devices (`distributed_ops`); absent: one
    asyncdsl.ctas_per_sm       i64: built for this many CTAs a multiprocessor at once (registers
                               and shared memory shared among them); absent: one

and on an `index` argument (a runtime int):

    asyncdsl.divisor           i64: the value is a multiple of it (the call's specialization)
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, StringAttr

from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.im2col_ops import Im2colDescriptorAttr
from asyncdsl.dialects.option_attrs import ArchAttr
from asyncdsl.hw.options import Arch

KERNEL = "asyncdsl.kernel"
BLOCK = "asyncdsl.block"
CLUSTER = "asyncdsl.cluster"
ARG_NAMES = "asyncdsl.arg_names"
ARCH = "asyncdsl.arch"
SMEM_BYTES = "asyncdsl.smem_bytes"
DESCRIPTORS = "asyncdsl.descriptors"
DESCRIPTOR_MODE = "asyncdsl.descriptor_mode"
DESCRIPTOR_SLOTS = "asyncdsl.descriptor_slots"
DEBUG = "asyncdsl.debug"
TILE_SCRATCH = "asyncdsl.tile_scratch"
PROFILE = "asyncdsl.profile"
ARG_DIVISOR = "asyncdsl.divisor"
DEVICES = "asyncdsl.devices"
CTAS_PER_SM = "asyncdsl.ctas_per_sm"


def dims(fn: func.FuncOp, name: str) -> tuple[int, int, int]:
    attr = fn.attributes[name]
    assert isinstance(attr, DenseArrayBase)
    x, y, z = attr.get_values()
    return x, y, z


def devices(fn: func.FuncOp) -> int:
    """How many devices the kernel was traced for (1 unless `asyncdsl.devices` says more)."""
    attr = fn.attributes.get(DEVICES)
    return attr.value.data if isinstance(attr, IntegerAttr) else 1


def ctas_per_sm(fn: func.FuncOp) -> int:
    """How many CTAs of the kernel a multiprocessor is to hold at once (1 unless it says more)."""
    attr = fn.attributes.get(CTAS_PER_SM)
    return attr.value.data if isinstance(attr, IntegerAttr) else 1


def arch(fn: func.FuncOp) -> Arch:
    attr = fn.attributes.get(ARCH)
    return attr.data if isinstance(attr, ArchAttr) else Arch.SM_90A


def smem_bytes(fn: func.FuncOp) -> int:
    attr = fn.attributes.get(SMEM_BYTES)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def arg_names(fn: func.FuncOp) -> tuple[str, ...]:
    attr = fn.attributes.get(ARG_NAMES)
    return tuple(a.data for a in attr) if isinstance(attr, ArrayAttr) else ()


def arg_divisor(fn: func.FuncOp, index: int) -> int:
    """What argument `index` is known to be a multiple of (1: nothing known)."""
    if fn.arg_attrs is None:
        return 1
    attr = fn.arg_attrs.data[index].data.get(ARG_DIVISOR)
    return attr.value.data if isinstance(attr, IntegerAttr) else 1


def descriptors(fn: func.FuncOp) -> list[TmaDescriptorAttr | Im2colDescriptorAttr]:
    attr = fn.attributes.get(DESCRIPTORS)
    return list(attr.data) if isinstance(attr, ArrayAttr) else []


def descriptor_mode(fn: func.FuncOp) -> str:
    attr = fn.attributes.get(DESCRIPTOR_MODE)
    return attr.data if isinstance(attr, StringAttr) else "grid_constant"


def descriptor_slots(fn: func.FuncOp) -> tuple[int, ...]:
    attr = fn.attributes.get(DESCRIPTOR_SLOTS)
    return tuple(attr.get_values()) if isinstance(attr, DenseArrayBase) else ()


def tile_scratch(fn: func.FuncOp) -> tuple[int, int] | None:
    """(offset, bytes per warpgroup) of the register tiles' shared-memory scratch, if any."""
    attr = fn.attributes.get(TILE_SCRATCH)
    if not isinstance(attr, DenseArrayBase):
        return None
    offset, size = attr.get_values()
    return offset, size


def debug(fn: func.FuncOp) -> bool:
    return DEBUG in fn.attributes


def profile_events(fn: func.FuncOp) -> int | None:
    """Region events each warpgroup's profile record holds, or None: the kernel is not profiled."""
    attr = fn.attributes.get(PROFILE)
    return attr.value.data if isinstance(attr, IntegerAttr) else None


def kernels(module) -> list[func.FuncOp]:
    return [op for op in module.ops if isinstance(op, func.FuncOp) and KERNEL in op.attributes]
