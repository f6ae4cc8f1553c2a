"""resolve-transforms on small IR modules: what the hardware copy looks like after the pass,
and each rule it enforces, reported at the user's line."""

from __future__ import annotations

from support import expect
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.passes.pipeline import ir_text, make_context
from asyncdsl.passes.resolve_transforms import ResolveTransforms

KERNEL_HEAD = (
    'func.func @k(%x: memref<{shape}>) attributes {{asyncdsl.kernel, asyncdsl.block = array<i64: 128, 1, 1>, '
    'asyncdsl.cluster = array<i64: 1, 1, 1>, asyncdsl.arg_names = ["x"], asyncdsl.arch = '
    '#asyncdsl<arch sm_90a>}} {{'
)


def run_pass(body: str, shape: str):
    text = "builtin.module {\n" + KERNEL_HEAD.format(shape=shape) + body + "\n func.return\n }\n}"
    module = Parser(make_context(), text).parse_module()
    ResolveTransforms().apply(make_context(), module)
    module.verify()
    return module


def only(module, op_class):
    (found,) = [op for op in module.walk() if isinstance(op, op_class)]
    return found


SQUEEZED_LOAD = """
    %buf = "asyncdsl.alloc_smem"() <{alignment = 128 : i64}> : () -> memref<64x128xf32, #asyncdsl.smem>
    %bars = "asyncdsl.alloc_barriers"() <{arrival_count = 1 : i64}> : () -> !asyncdsl.barriers<1>
    %i = "asyncdsl.program_id"() <{axis = 0 : i64}> : () -> index
    %j = "asyncdsl.program_id"() <{axis = 1 : i64}> : () -> index
    %c0 = arith.constant 0 : index
    "asyncdsl.async_copy"(%x, %buf, %i, %j, %c0, %bars, %c0) <{slice_sizes = array<i64: -1, 64, 128>,
        transforms = [], swizzle = 0 : i64, arrive = true, collective = [], \
implementation = #asyncdsl<implementation tma>,
        oob = #asyncdsl<oob zeros>, operandSegmentSizes = array<i32: 1, 1, 3, 1, 1, 0, 0>}>
        : (memref<8x256x128xf32>, memref<64x128xf32, #asyncdsl.smem>, index, index, index, \
!asyncdsl.barriers<1>, index) -> ()
"""


def test_squeezed_dim_keeps_the_view_and_a_unit_box():
    module = run_pass(SQUEEZED_LOAD, "8x256x128xf32")
    load = only(module, ir.TmaLoadOp)
    spec = load.descriptor.spec()
    assert ((spec.global_dims, spec.global_strides, spec.box_dims)
            == ((8, 256, 128), (131072, 512, 4), (1, 64, 128)))
    # Coordinates are the slice starts themselves: the squeezed index, the window start, 0.
    names = [c.owner.name if c.owner else "arg" for c in load.coords]
    assert names[:2] == ["asyncdsl.program_id", "asyncdsl.program_id"]
    assert load.expect_tx_bytes.value.data == 64 * 128 * 4
    assert not any(isinstance(op, ir.AsyncCopyOp) for op in module.walk())


TILED_SWIZZLED_LOAD = """
    %buf = "asyncdsl.alloc_smem"() <{alignment = 128 : i64}> : () -> memref<8x2x8x64xbf16, #asyncdsl.smem>
    %bars = "asyncdsl.alloc_barriers"() <{arrival_count = 1 : i64}> : () -> !asyncdsl.barriers<1>
    %i = "asyncdsl.program_id"() <{axis = 0 : i64}> : () -> index
    %c64 = arith.constant 64 : index
    %row = arith.muli %i, %c64 : index
    %c0 = arith.constant 0 : index
    "asyncdsl.async_copy"(%x, %buf, %row, %c0, %bars, %c0) <{slice_sizes = array<i64: 64, 128>,
        transforms = [#asyncdsl.tile<[8, 64]>], swizzle = 128 : i64, arrive = true, collective = [],
        implementation = #asyncdsl<implementation tma>, oob = #asyncdsl<oob zeros>, \
operandSegmentSizes = array<i32: 1, 1, 2, 1, 1, 0, 0>}>
        : (memref<256x512xbf16>, memref<8x2x8x64xbf16, #asyncdsl.smem>, index, index, \
!asyncdsl.barriers<1>, index) -> ()
"""


def test_tiling_for_wgmma_becomes_a_4d_view_with_traced_tile_coordinates():
    module = run_pass(TILED_SWIZZLED_LOAD, "256x512xbf16")
    spec = only(module, ir.TmaLoadOp).descriptor.spec()
    # (256, 512) tiled by (8, 64): tile counts (32, 8) then the tile, in element strides
    # (8*512, 64, 512, 1), as bytes.
    assert spec.global_dims == (32, 8, 8, 64)
    assert spec.global_strides == (8192, 128, 1024, 2)
    assert spec.box_dims == (8, 2, 8, 64)
    assert spec.swizzle_bytes == 128
    text = ir_text(module)
    # The row start (a traced value) is divided by the tile height on the GPU: row // 8.
    assert "arith.floordivsi" in text


def test_unchanged_ops_pass_through():
    module = run_pass("", "8x8xf32")
    assert not any(isinstance(op, (ir.TmaLoadOp, ir.TmaStoreOp)) for op in module.walk())


# -- the rules, reported at the user's line -----------------------------------------------------


def _copy_kernel(smem_shape, index, **options):
    @ad.kernel
    def kernel(x):
        buf = ad.smem(smem_shape, x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[index], buf, barrier=bar, **options)  # the copy

    return kernel


def _expect(kernel, shape, dtype, *fragments):
    expect(ad.CopyError, kernel, (ad.ArraySpec(shape, dtype),), {}, *fragments, line_text="the copy")


def test_rule_at_most_five_dims():
    index = (slice(None),) * 6
    _expect(_copy_kernel((2, 2, 2, 2, 2, 8), index), (2, 2, 2, 2, 2, 8), ad.float32, "at most 5 dims")


def test_rule_minor_dim_must_stay_innermost():
    kernel = _copy_kernel((8, 16), (slice(None), slice(None)), transforms=ad.TransposeTransform((1, 0)))
    _expect(kernel, (16, 8), ad.float32, "innermost", "stride")


def test_rule_box_dims_at_most_256():
    _expect(_copy_kernel((512, 8), (slice(0, 512), slice(None))), (512, 8), ad.float32, "512", "256")


def test_rule_gmem_strides_multiple_of_16_bytes():
    _expect(_copy_kernel((4, 4), (slice(0, 4), slice(0, 4))), (8, 13), ad.float32, "stride 52", "16")


def test_rule_minor_bytes_multiple_of_16():
    _expect(_copy_kernel((4, 2), (slice(0, 4), slice(0, 2))), (8, 16), ad.float32, "8 bytes", "16")


def test_rule_swizzle_width():
    _expect(_copy_kernel((8, 8), (slice(0, 8), slice(0, 8)), swizzle=64), (8, 64), ad.float32,
            "swizzle 64", "32 bytes")


def test_rule_smem_shape_is_the_transformed_slice():
    kernel = _copy_kernel((64, 64), (slice(0, 64), slice(0, 64)), transforms=ad.TileTransform((8, 32)))
    _expect(kernel, (64, 64), ad.float16, "(64, 64)", "(8, 2, 8, 32)")


def test_rule_tiled_window_starts_on_a_tile():
    kernel = _copy_kernel((1, 2, 8, 32), (slice(4, 12), slice(0, 64)), transforms=ad.TileTransform((8, 32)))
    _expect(kernel, (64, 64), ad.float16, "start 4", "tile 8")
