"""The default pass pipeline, in order, and compiling a traced module with it.

    infer-layouts                 every register tile gets a register layout
    plan-smem-access              descriptor constants of every wgmma operand in shared memory
    resolve-transforms            user copies -> hardware copies (TMA boxes, coordinates, checks)
    partition-collectives         collective copies -> per-CTA slices + multicast masks
    allocate-smem                 static offsets for buffers and barriers, budget check
    allocate-descriptor-scratch   number descriptors; by-value params or a GMEM scratch
    lower-to-ptx                  everything -> `ptx.kernel`, printed by `print_ptx`

The interpreter runs the module as it stands after every pass but the last (`async_passes`), which is the
IR the GPU's PTX is printed from.  `compile_module` runs them all and hands back the PTX and the
`KernelBinary` the runtime launches; `ASYNCDSL_DUMP_IR=1` prints the IR after every pass and the
PTX to stderr as kernels compile.  It lowers to PTX into a module of its own, so the
interpreter's module is the very one the passes ran on: a compile copies no IR.
"""

from __future__ import annotations

import gc
import io
import sys
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.printer import Printer

from asyncdsl.config import knobs
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.ptx import Ptx, print_ptx
from asyncdsl.errors import ResourceError
from asyncdsl.hw.limits import SMEM_ALIGNMENT_SLACK
from asyncdsl.hw.options import PTX_VERSIONS
from asyncdsl.ir_locations import from_ir_location
from asyncdsl.kernel_binary import KernelBinary
from asyncdsl.passes.allocate_descriptor_scratch import AllocateDescriptorScratch
from asyncdsl.passes.allocate_smem import AllocateSmem
from asyncdsl.passes.infer_layouts import InferLayouts
from asyncdsl.passes.lower_to_ptx import LowerToPtx, lower_kernel
from asyncdsl.passes.partition_collectives import PartitionCollectives
from asyncdsl.passes.plan_smem_access import PlanSmemAccess
from asyncdsl.passes.resolve_transforms import ResolveTransforms
from asyncdsl.passes.to_ptx.kernel import kernel_params


def async_passes(descriptor_mode: str = "grid_constant") -> tuple[ModulePass, ...]:
    """The passes that keep the IR in the `asyncdsl` dialect."""
    return (
        InferLayouts(),
        PlanSmemAccess(),
        ResolveTransforms(),
        PartitionCollectives(),
        AllocateSmem(),
        AllocateDescriptorScratch(mode=descriptor_mode),
    )


def default_pipeline(descriptor_mode: str = "grid_constant") -> tuple[ModulePass, ...]:
    return (*async_passes(descriptor_mode), LowerToPtx())


PASS_NAMES = tuple(p.name for p in default_pipeline())
STAGE_NAMES = ("trace", *PASS_NAMES, "ptx")  # what `compile_module` can keep, in order


def make_context() -> Context:
    """An xDSL context that knows every dialect asyncdsl's IR uses (for parsing it back)."""
    # Loaded here, not with the module: a compile needs only the ops its kernel holds, and the
    # whole `asyncdsl` dialect and xDSL's `math` take a good part of the compiler's import.
    from xdsl.dialects import arith, builtin, func, math, scf

    from asyncdsl.dialects.asyncdsl import AsyncDSL

    ctx = Context()
    for dialect in (builtin.Builtin, func.Func, arith.Arith, math.Math, scf.Scf, AsyncDSL, Ptx):
        ctx.load_dialect(dialect)
    return ctx


def ir_text(module: ModuleOp) -> str:
    """The module as text, with source locations, in a form `make_context()` parses back."""
    stream = io.StringIO()
    Printer(stream=stream, print_debuginfo=True).print_op(module)
    return stream.getvalue() + "\n"


@dataclass
class CompiledKernel:
    """Everything one specialization compiled to."""

    module: ModuleOp  # asyncdsl IR after the asyncdsl-level passes (what the interpreter runs)
    ptx: str
    binary: KernelBinary
    trace: Callable[[], ModuleOp]  # traces the kernel again (the passes consumed what it traced)
    stages: list[tuple[str, str]] = field(default_factory=list)  # (after pass, IR text)

    @property
    def traced(self) -> str:
        """The IR text as traced: traced again, as it is rarely wanted and a copy kept for it would
        cost every compile (tracing is deterministic)."""
        return ir_text(self.trace())


def compile_module(
    trace: Callable[[], ModuleOp],
    *,
    descriptor_mode: str = "grid_constant",
    keep_stages: bool | Collection[str] = False,
    on_stage: Callable[[str, str], None] | None = None,
) -> CompiledKernel:
    """Run the pipeline on the module `trace` builds and print its PTX.  `keep_stages` keeps the
    text of every stage (`True`) or of the named ones (of `STAGE_NAMES`) in `CompiledKernel.stages`:
    printing the IR after a pass can cost as much as running it, so a caller prints only what it reads."""
    if isinstance(keep_stages, bool):
        keep_stages = STAGE_NAMES if keep_stages else ()
    with _collector_paused():
        return _compile(trace, descriptor_mode, keep_stages, on_stage)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a kernel compiles.  A compile allocates
    tens of thousands of objects, and in a process holding many more (torch imported, a CUDA
    context) the collections they set off cost more than the compile: the GEMM's trace, passes
    and PTX took 156-166 ms with the collector on, 68-72 ms with it off, in fresh processes on
    the H200's host.  The IR's reference cycles go at the next collection after."""
    if not gc.isenabled():  # the caller's choice (or another thread compiling): leave it
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _compile(trace: Callable[[], ModuleOp], descriptor_mode: str, keep_stages: Collection[str],
             on_stage: Callable[[str, str], None] | None) -> CompiledKernel:
    ctx = Context()  # the passes parse nothing: no dialect need be loaded into it
    dump = on_stage or (_dump_to_stderr if knobs.dump_ir else None)
    stages: list[tuple[str, str]] = []

    def record(name: str, text_of: Callable[[], str]) -> None:
        keep = name in keep_stages
        if keep or dump:
            text = text_of()
            if keep:
                stages.append((name, text))
            if dump:
                dump(name, text)

    module = trace()
    try:
        return _passes_and_ptx(ctx, module, trace, descriptor_mode, record, stages)
    except RecursionError:
        # xDSL walks nested regions recursively: loops and branches nested some hundreds deep
        # (a kernel's Python recursing through ad.range) exceed Python's stack in a pass.
        depth, deepest = _deepest_nesting(module)
        raise ResourceError(
            f"the kernel nests loops and branches {depth} deep, deeper than the compiler can walk within "
            f"Python's recursion limit ({sys.getrecursionlimit()}): unroll the inner levels with Python "
            "loops, or flatten them into fewer traced loops", from_ir_location(deepest)) from None


def _passes_and_ptx(ctx, module: ModuleOp, trace, descriptor_mode: str, record, stages) -> CompiledKernel:
    record("trace", lambda: ir_text(module))
    for compiler_pass in async_passes(descriptor_mode):
        compiler_pass.apply(ctx, module)
        record(compiler_pass.name, lambda: ir_text(module))

    (fn,) = attrs.kernels(module)
    binary_facts = _binary_facts(fn)
    target = binary_facts["arch"]
    # Versions are (major, minor) pairs: the highest any instruction needs is their max.
    version = max([PTX_VERSIONS[target], *(op.types.ptx_version for op in fn.walk()
                                           if isinstance(op, ir.WgmmaOp))])

    # The PTX goes in a module of its own, leaving `module` to the interpreter.
    lowered = ModuleOp([lower_kernel(fn, binary_facts["params"])])
    record("lower-to-ptx", lambda: ir_text(lowered))
    ptx = print_ptx(lowered, version=version, target=target)
    record("ptx", lambda: ptx)
    binary = KernelBinary(ptx=ptx, **binary_facts)
    return CompiledKernel(module, ptx, binary, trace, stages)


def _deepest_nesting(module: ModuleOp) -> tuple[int, Operation]:
    """How many regions deep the module's ops go, and an op that deep (walked without recursion)."""
    deepest, pending = (0, module), [(module, 0)]
    while pending:
        op, depth = pending.pop()
        deepest = max(deepest, (depth, op), key=lambda entry: entry[0])
        pending.extend((inner, depth + 1) for region in op.regions for block in region.blocks
                       for inner in block.ops)
    return deepest


def _binary_facts(fn) -> dict:
    smem = attrs.smem_bytes(fn)
    return dict(
        name=fn.sym_name.data,
        params=kernel_params(fn),
        descriptors=tuple(d.spec() for d in attrs.descriptors(fn)),
        block=attrs.dims(fn, attrs.BLOCK),
        cluster=attrs.dims(fn, attrs.CLUSTER),
        dynamic_smem_bytes=smem + SMEM_ALIGNMENT_SLACK if smem else 0,
        # The arrays' names, which a launch takes in this order (scalar parameters name themselves).
        arg_names=tuple(
            name for name, arg in zip(attrs.arg_names(fn), fn.args) if isinstance(arg.type, MemRefType)
        ),
        arch=attrs.arch(fn),
    )


def _dump_to_stderr(stage: str, text: str) -> None:
    print(f"// ----- asyncdsl: after {stage} -----", file=sys.stderr)
    print(text, file=sys.stderr)
