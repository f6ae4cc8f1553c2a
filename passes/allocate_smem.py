"""`allocate-smem`: give every shared-memory buffer and barrier group a static offset.

Expects: `asyncdsl.alloc_smem` / `asyncdsl.alloc_barriers` at the top level of each kernel, and
copies already resolved (so the swizzle each buffer is used with is known).
Guarantees: each allocation has an `offset` (bytes from the kernel's 1024-aligned shared-memory
base), buffers used with swizzle S are aligned to the swizzle's repeat (8 rows of S bytes) so
the pattern starts at the buffer's first row, the kernel carries `asyncdsl.smem_bytes`, and the
total fits the device, or a `ResourceError` lists every allocation with its source line.

Example:

    %a = "asyncdsl.alloc_smem"() <{alignment = 128 : i64}> : () -> memref<64x64xf32, #asyncdsl.smem>
    %b = "asyncdsl.alloc_barriers"() <{arrival_count = 1 : i64}> : () -> !asyncdsl.barriers<2>

becomes

    %a = "asyncdsl.alloc_smem"() <{alignment = 128 : i64, offset = 0 : i64}> ...
    %b = "asyncdsl.alloc_barriers"() <{arrival_count = 1 : i64, offset = 16384 : i64}> ...
    func.func @k(...) attributes {asyncdsl.smem_bytes = 16400 : i64, ...}
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, i64
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.copy_bases import Row4Copy, TmaBox
from asyncdsl.errors import ResourceError, SourceLocation
from asyncdsl.hw.limits import BARRIER_BYTES, MAX_SMEM_PER_BLOCK, SMEM_ALIGNMENT_SLACK, SMEM_PER_SM
from asyncdsl.hw.occupancy import smem_per_cta
from asyncdsl.ir_locations import from_ir_location

TILE_SCRATCH_ALIGNMENT = 16  # the widest shared-memory access


# What takes shared memory: a buffer, a barrier group, or the kernel's register-tile scratch.
Allocation = ir.AllocSmemOp | ir.AllocBarriersOp | func.FuncOp
Placed = tuple[Allocation, int, int]  # an allocation, its offset and its bytes


@dataclass(frozen=True)
class AllocateSmem(ModulePass):
    name = "allocate-smem"

    limit_bytes: int = MAX_SMEM_PER_BLOCK

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in attrs.kernels(op):
            self._allocate(fn)

    def _allocate(self, fn: func.FuncOp) -> None:
        swizzles = _swizzle_of_buffers(fn)
        offset = 0
        plan: list[Placed] = []
        allocations = [op for op in fn.walk() if isinstance(op, (ir.AllocSmemOp, ir.AllocBarriersOp))]
        # Buffers first, in program order; barrier groups (8-byte aligned, small) after them.
        allocations.sort(key=lambda op: isinstance(op, ir.AllocBarriersOp))
        for alloc in allocations:
            if isinstance(alloc, ir.AllocSmemOp):
                size = ir.buffer_bytes(alloc.result.type)
                alignment = max(alloc.alignment.value.data, 8 * swizzles.get(alloc.result, 0))
            else:
                size = BARRIER_BYTES * alloc.result.type.count.data
                alignment = BARRIER_BYTES
            offset = -(-offset // alignment) * alignment
            alloc.properties["offset"] = IntegerAttr(offset, i64)
            plan.append((alloc, offset, size))
            offset += size
        scratch = max((ir.scratch_bytes(op) for op in fn.walk()), default=0)
        if scratch:
            # One scratch per warpgroup: each exchanges its own tiles' data, at its own pace.
            block = attrs.dims(fn, attrs.BLOCK)
            warpgroups = block[0] * block[1] * block[2] // 128
            scratch = -(-scratch // TILE_SCRATCH_ALIGNMENT) * TILE_SCRATCH_ALIGNMENT
            offset = -(-offset // TILE_SCRATCH_ALIGNMENT) * TILE_SCRATCH_ALIGNMENT
            fn.attributes[attrs.TILE_SCRATCH] = DenseArrayBase.from_list(i64, [offset, scratch])
            plan.append((fn, offset, scratch * warpgroups))
            offset += scratch * warpgroups
        limit = min(self.limit_bytes, smem_per_cta(attrs.ctas_per_sm(fn)))
        usable = limit - SMEM_ALIGNMENT_SLACK
        if offset > usable:
            raise ResourceError(_overflow_report(fn, plan, offset, limit), _first_overflow(plan, usable))
        fn.attributes[attrs.SMEM_BYTES] = IntegerAttr(offset, i64)


def _swizzle_of_buffers(fn: func.FuncOp) -> dict[SSAValue, int]:
    """The largest swizzle (bytes) each allocated buffer is copied with, through views."""
    found: dict[SSAValue, int] = {}
    for op in fn.walk():
        # Every hardware copy with an SMEM side and a descriptor (tiled, im2col, gather4, ...).
        if isinstance(op, (TmaBox, Row4Copy, ir.TmaIm2colLoadOp)):
            buffer = ir.root_buffer(op.smem)
            swizzle = op.descriptor.swizzle_bytes.data
            found[buffer] = max(found.get(buffer, 0), swizzle)
        elif isinstance(op, ir.CpAsyncLoadOp):  # swizzles in software, the same pattern
            buffer = ir.root_buffer(op.smem)
            found[buffer] = max(found.get(buffer, 0), op.swizzle_bytes.value.data)
    return found



def _describe(alloc: Allocation) -> str:
    if isinstance(alloc, func.FuncOp):
        return "register tile scratch"
    if isinstance(alloc, ir.AllocSmemOp):
        shape = "x".join(map(str, ir.shape_of(alloc.result)))
        return f"buffer {shape}x{alloc.result.type.element_type}"
    return f"{alloc.result.type.count.data} barrier(s)"


def _overflow_report(fn: func.FuncOp, plan: list[Placed], total: int, limit: int) -> str:
    ctas = attrs.ctas_per_sm(fn)
    whose = (f"{limit} per block on H100/H200" if ctas == 1 else
             f"{limit}, its share of a multiprocessor's {SMEM_PER_SM} where {ctas} CTAs are to fit at once")
    lines = [
        f"kernel {fn.sym_name.data} needs {total} bytes of shared memory, but a CTA can use "
        f"{limit - SMEM_ALIGNMENT_SLACK} ({whose}, minus {SMEM_ALIGNMENT_SLACK} "
        "reserved to align the base to 1024 bytes). Allocations:"
    ]
    for alloc, offset, size in plan:
        where = from_ir_location(alloc)
        lines.append(f"  {_describe(alloc):32s} {size:8d} bytes at offset {offset:6d}  ({where})")
    lines.append("Use fewer pipeline stages or smaller tiles.")
    return "\n".join(lines)


def _first_overflow(plan: list[Placed], usable: int) -> SourceLocation | None:
    for alloc, offset, size in plan:
        if offset + size > usable:
            return from_ir_location(alloc)
    return None
