"""From a traced module to PTX and a `KernelBinary`: runs the pass pipeline, with dumps.

`ASYNCDSL_DUMP_IR=1` prints the IR after every pass and the PTX to stderr as kernels compile.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.asyncdsl import AsyncDSL
from asyncdsl.dialects.ptx import Ptx, print_ptx
from asyncdsl.kernel_binary import KernelBinary
from asyncdsl.passes.lower_to_ptx import LowerToPtx
from asyncdsl.passes.pipeline import async_passes
from asyncdsl.passes.ptx_lowering.kernel import kernel_params

DUMP_ENV = "ASYNCDSL_DUMP_IR"


def make_context() -> Context:
    """An xDSL context that knows every dialect asyncdsl's IR uses (for parsing it back)."""
    ctx = Context()
    for dialect in (builtin.Builtin, func.Func, arith.Arith, scf.Scf, AsyncDSL, Ptx):
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

    traced: str  # IR text as traced
    module: ModuleOp  # asyncdsl IR after the asyncdsl-level passes (what the interpreter runs)
    ptx: str
    binary: KernelBinary
    stages: list[tuple[str, str]] = field(default_factory=list)  # (after pass, IR text)


def compile_module(
    module: ModuleOp,
    *,
    descriptor_mode: str = "grid_constant",
    keep_stages: bool = False,
    on_stage: Callable[[str, str], None] | None = None,
) -> CompiledKernel:
    """Run the pipeline on `module` (consumed) and print its PTX."""
    ctx = make_context()
    dump = on_stage or (_dump_to_stderr if os.environ.get(DUMP_ENV) else None)
    stages: list[tuple[str, str]] = []

    def record(name: str, text_of: Callable[[], str]) -> None:
        if keep_stages or dump:
            text = text_of()
            if keep_stages:
                stages.append((name, text))
            if dump:
                dump(name, text)

    traced = ir_text(module)
    record("trace", lambda: traced)
    for compiler_pass in async_passes(descriptor_mode):
        compiler_pass.apply(ctx, module)
        record(compiler_pass.name, lambda: ir_text(module))

    (fn,) = attrs.kernels(module)
    binary_facts = _binary_facts(fn)
    interpretable = module.clone()

    LowerToPtx().apply(ctx, module)
    record("lower-to-ptx", lambda: ir_text(module))
    target = binary_facts["arch"]
    ptx = print_ptx(module, version=attrs.PTX_VERSIONS[target], target=target)
    record("ptx", lambda: ptx)
    binary = KernelBinary(ptx=ptx, **binary_facts)
    return CompiledKernel(traced, interpretable, ptx, binary, stages)


def _binary_facts(fn) -> dict:
    smem = attrs.smem_bytes(fn)
    return dict(
        name=fn.sym_name.data,
        params=kernel_params(fn),
        descriptors=tuple(d.spec() for d in attrs.descriptors(fn)),
        block=attrs.dims(fn, attrs.BLOCK),
        cluster=attrs.dims(fn, attrs.CLUSTER),
        dynamic_smem_bytes=smem + attrs.SMEM_ALIGNMENT_SLACK if smem else 0,
        arg_names=attrs.arg_names(fn),
        arch=attrs.arch(fn),
    )


def _dump_to_stderr(stage: str, text: str) -> None:
    print(f"// ----- asyncdsl: after {stage} -----", file=sys.stderr)
    print(text, file=sys.stderr)
