"""Global addresses of GMEM windows, for the copies that address memory without a tensor map.

A kernel argument arrives as a `.u64` parameter holding its device address (parameter i is
array i, `kernel.kernel_params`); `cvta.to.global.u64` makes it the global-space address that
`cp.async.bulk` and `cp.async` take (docs/hardware.md §13.2, §8).  The window's first element lies
`sum(start[d] * byte_stride[d])` bytes further; each traced start is widened to 64 bits as it is
multiplied (`mul.wide.s32`), so arrays past 2^31 bytes address correctly.

Example, x: 64x256xf32 and the window x.at[ds(i, 4), :]:

    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.s32 %rd2, %r7, 1024;
    add.s64 %rd3, %rd1, %rd2;
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import BlockArgument, SSAValue

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.hw import gmem_runs
from asyncdsl.passes.to_ptx.context import KernelLowering

_S32_MAX = 2**31 - 1


def window_offset(ctx: KernelLowering, gmem: SSAValue, starts: Sequence[SSAValue]) -> int | SSAValue:
    """Bytes from the array's start to the window's first element: an int when every start is
    a constant, else a b64 register."""
    b = ctx.b
    element = dtypes.from_mlir(ir.shaped_type(gmem.type).element_type)
    strides = gmem_runs.byte_strides(ir.shape_of(gmem), element)
    static, traced = 0, None
    for start, stride in zip(starts, strides):
        known = ctx.constant(start)
        if known is not None:
            static += known * stride
            continue
        term = wide_product(ctx, ctx.reg(start), stride, signed=True)
        traced = term if traced is None else b.emit("add.s64 {}, {}, {};", "b64", traced, term)
    if traced is None:
        return static
    return b.emit("add.s64 {}, {}, {};", "b64", traced, static) if static else traced


def wide_product(ctx: KernelLowering, value: SSAValue, factor: int, *, signed: bool) -> SSAValue:
    """`value` (b32) times `factor` as a b64 register."""
    kind = "s" if signed else "u"
    if (-_S32_MAX - 1 if signed else 0) <= factor <= _S32_MAX:
        return ctx.b.emit(f"mul.wide.{kind}32 {{}}, {{}}, {{}};", "b64", value, factor)
    wide = ctx.b.emit(f"cvt.{kind}64.{kind}32 {{}}, {{}};", "b64", value)
    return ctx.b.emit("mul.lo.s64 {}, {}, {};", "b64", wide, factor)


def array_address(ctx: KernelLowering, gmem: SSAValue) -> SSAValue:
    """The global-space address of kernel argument `gmem` (a b64 register)."""
    assert isinstance(gmem, BlockArgument), "GMEM refs are kernel arguments"
    address = ctx.b.emit(f"ld.param.u64 {{}}, [#{{{{param:{gmem.index}}}}}];", "b64")
    ctx.b.run("cvta.to.global.u64 {}, {};", address, address)
    return address


def window_address(ctx: KernelLowering, gmem: SSAValue, offset: int | SSAValue) -> SSAValue:
    """The global-space address `offset` bytes into kernel argument `gmem` (a b64 register)."""
    base = array_address(ctx, gmem)
    if isinstance(offset, int) and offset == 0:
        return base
    return ctx.b.emit("add.s64 {}, {}, {};", "b64", base, offset)
