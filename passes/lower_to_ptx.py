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

import importlib
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects import ptx
from asyncdsl.kernel_binary import KernelParam
from asyncdsl.passes.to_ptx import barriers, roles
from asyncdsl.passes.to_ptx.context import KernelLowering, Rule, Rules
from asyncdsl.passes.to_ptx.kernel import (
    emit_epilogue,
    emit_prologue,
    kernel_params,
    param_kinds,
)

# The rule modules (`passes/to_ptx`, each with its `RULES` table) that lower the ops of each op
# module.
RULE_MODULES: dict[str, tuple[str, ...]] = {
    "xdsl.dialects.arith": ("scalars",),
    "xdsl.dialects.scf": ("control",),
    "asyncdsl.dialects.core_ops": ("core",),
    "asyncdsl.dialects.sync_ops": ("sync",),
    "asyncdsl.dialects.turns_ops": ("turns",),
    "asyncdsl.dialects.copy_ops": ("copy",),
    "asyncdsl.dialects.tma_ops": ("tma",),
    "asyncdsl.dialects.bulk_ops": ("bulk",),
    "asyncdsl.dialects.cp_async_ops": ("cp_async",),
    "asyncdsl.dialects.collective_ops": ("collective",),
    "asyncdsl.dialects.prefetch_ops": ("prefetch",),
    "asyncdsl.dialects.im2col_ops": ("im2col",),
    "asyncdsl.dialects.row_gather_ops": ("row_gather",),
    "asyncdsl.dialects.assume_ops": ("assume",),
    "asyncdsl.dialects.tiles_ops": ("tiles",),
    "asyncdsl.dialects.tile_access_ops": ("tile_access", "tile_gmem"),
    "asyncdsl.dialects.registers_ops": ("registers",),
    "asyncdsl.dialects.profile_ops": ("profile",),
    "asyncdsl.dialects.wgmma_ops": ("wgmma",),
    "asyncdsl.dialects.roles_ops": ("roles",),
    "asyncdsl.dialects.distributed_ops": ("distributed",),
    "asyncdsl.dialects.index_load_ops": ("index_loads",),
}
# The op modules whose ops on tiles and non-index scalars are per-element rules
# (`tile_math.ELEMENT_RULES`); the index arithmetic among them keeps its rule (`scalars.py`),
# chosen per op by its operand types.
ELEMENTWISE_OP_MODULES = ("xdsl.dialects.arith", "xdsl.dialects.math", "asyncdsl.dialects.tile_math_ops")


class RuleTable(Rules):
    """Every op the pass lowers, by class: the rules of an op module load with the first op of
    it that a kernel holds, so that a compile loads the rule modules, and through them the op
    modules, of the ops its kernel uses and no others."""

    def __init__(self) -> None:
        super().__init__()
        self._loaded: set[str] = set()

    # `KernelLowering.lower` looks rules up with `get`: overridden in its plain (key, default) form.
    def get(self, op_class: type[Operation], default: Rule | None = None) -> Rule | None:  # type: ignore[override]
        if op_class not in self and op_class.__module__ not in self._loaded:
            self.load(op_class.__module__)
        return super().get(op_class, default)

    def load(self, op_module: str) -> None:
        """Add the rules of the ops of `op_module` (all at once: a compile in another thread
        finds an op's rule complete or not at all)."""
        rules: Rules = {}
        for name in RULE_MODULES.get(op_module, ()):
            rules.update(importlib.import_module(f"asyncdsl.passes.to_ptx.{name}").RULES)
        table = dict(rules)
        if op_module in ELEMENTWISE_OP_MODULES:
            from asyncdsl.passes.to_ptx import tile_math

            for op_class, rule in tile_math.ELEMENT_RULES.items():
                if op_class.__module__ == op_module:
                    table[op_class] = tile_math.elementwise(rule, rules.get(op_class))
        self.update(table)
        self._loaded.add(op_module)


RULES = RuleTable()


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
        maxnreg=roles.entry_registers(kernel_ops, block[0] * block[1] * block[2], attrs.ctas_per_sm(fn)),
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
