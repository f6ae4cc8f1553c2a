"""`lower-to-ptx`: every kernel `func.func` becomes a `ptx.kernel` of PTX instructions.

Expects: copies resolved to `asyncdsl.tma_load`/`tma_store` (resolve-transforms), shared memory
and barriers with offsets (allocate-smem), descriptors numbered (allocate-descriptor-scratch).
Guarantees: the module holds only `ptx.kernel` ops, which `print_ptx` turns into PTX text.

Example (a 2-D tile load):

    %bars = "asyncdsl.alloc_barriers"() <{arrival_count = 1 : i64, offset = 8192 : i64}>
    "asyncdsl.tma_load"(%buf, %i, %j, %bars, %c0) <{descriptor = #asyncdsl.tma_desc<...>,
        descriptor_index = 0 : i64, expect_tx_bytes = 8192 : i64, ...}>

becomes, in the printed PTX,

    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r9], 8192;
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
        [%r8], [%rd1, {%r6, %r5}], [%r9];
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects import ptx
from asyncdsl.kernel_binary import KernelParam
from asyncdsl.passes.to_ptx import (
    assume,
    barriers,
    bulk,
    collective,
    control,
    copy,
    core,
    cp_async,
    distributed,
    im2col,
    index_loads,
    prefetch,
    profile,
    registers,
    roles,
    row_gather,
    scalars,
    sync,
    tile_access,
    tile_gmem,
    tile_math,
    tiles,
    tma,
    turns,
    wgmma,
)
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.kernel import (
    emit_epilogue,
    emit_prologue,
    kernel_params,
    param_kinds,
)

# Every op the pass lowers, by feature (one `passes/to_ptx` module each).
RULES: Rules = {
    **scalars.RULES,
    **control.RULES,
    **core.RULES,
    **sync.RULES,
    **turns.RULES,
    **copy.RULES,
    **tma.RULES,
    **bulk.RULES,
    **cp_async.RULES,
    **collective.RULES,
    **prefetch.RULES,
    **im2col.RULES,
    **row_gather.RULES,
    **assume.RULES,
    **tiles.RULES,
    **tile_access.RULES,
    **tile_gmem.RULES,
    **registers.RULES,
    **profile.RULES,
    **wgmma.RULES,
    **roles.RULES,
    **distributed.RULES,
    **index_loads.RULES,
}
# `arith` and `math` ops on tiles and non-index scalars are per-element rules; the index
# arithmetic among them keeps its rule (`scalars.py`), chosen per op by its operand types.
RULES.update({op_class: tile_math.elementwise(rule, RULES.get(op_class))
              for op_class, rule in tile_math.ELEMENT_RULES.items()})


@dataclass(frozen=True)
class LowerToPtx(ModulePass):
    name = "lower-to-ptx"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in attrs.kernels(op):
            op.body.block.insert_op_before(lower_kernel(fn), fn)
            fn.detach()
            fn.erase()


def lower_kernel(fn: func.FuncOp, params: tuple[KernelParam, ...] | None = None) -> ptx.KernelOp:
    """`fn` as a `ptx.kernel`; `fn` is left as it was (the rules only read the IR they lower).
    `params` are its `kernel_params` when the caller has them already."""
    params = kernel_params(fn) if params is None else params
    cluster = attrs.dims(fn, attrs.CLUSTER)
    block = attrs.dims(fn, attrs.BLOCK)
    kernel_ops = list(fn.walk())
    kernel = ptx.KernelOp(
        fn.sym_name.data,
        param_kinds(params),
        block,
        cluster if cluster != (1, 1, 1) else None,
        maxnreg=roles.entry_registers(kernel_ops, block[0] * block[1] * block[2]),
    )
    lowering = KernelLowering(kernel.body.block, RULES, kernel_ops)
    emit_prologue(lowering, fn, params)
    for inner in fn.body.block.ops:
        if isinstance(inner, func.ReturnOp):
            continue
        lowering.lower(inner)
    emit_epilogue(lowering)
    barriers.drop_redundant_barriers(kernel.body.block)
    return kernel
