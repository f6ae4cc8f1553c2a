"""Tensor-map specs: the rules they are checked against, the driver arguments they encode to
(with a fake encode function) and the cache of encoded images per address."""

from __future__ import annotations

import pytest
from runtime_fakes import fake_image, tiled_spec

from asyncdsl import dtypes
from asyncdsl.errors import CopyError
from asyncdsl.hw.tma import view_extent_bytes
from asyncdsl.kernel_binary import Im2colTensorMapSpec
from asyncdsl.runtime import tensormap

F32 = dtypes.TMA_FLOAT32


# ------------------------------------------------------------------------------------ tensor maps


def _im2col(**changes):
    fields = dict(arg_index=0, dtype_code=dtypes.TMA_BFLOAT16, element_bytes=2, global_dims=(2, 16, 16, 64),
                  global_strides=(16 * 16 * 64 * 2, 16 * 64 * 2, 64 * 2, 2), lower_corner=(-1, -1),
                  upper_corner=(-1, -1), channels_per_pixel=64, pixels_per_column=128, swizzle_bytes=128)
    fields.update(changes)
    return Im2colTensorMapSpec(**fields)


def test_valid_specs_pass():
    tensormap.validate_spec(tiled_spec())
    tensormap.validate_spec(tiled_spec(global_dims=(7,), global_strides=(4,), box_dims=(4,), swizzle_bytes=0))
    tensormap.validate_spec(tiled_spec(element_strides=(2, 1), oob_nan=True, l2_promotion_bytes=256))
    tensormap.validate_spec(_im2col())


@pytest.mark.parametrize(
    "spec, message",
    [
        (tiled_spec(global_dims=(1,) * 6, global_strides=(16,) * 5 + (4,), box_dims=(1,) * 6),
         "a tiled TMA descriptor has rank 1 to 5, not 6"),
        (tiled_spec(box_dims=(300, 32)), "TMA box dimension 300 > 256 along dim 0"),
        (tiled_spec(box_dims=(64, 0)), "TMA box dimension 0 < 1 along dim 1"),
        (tiled_spec(global_strides=(1000, 4)),
         "TMA global stride 1000 bytes along dim 0 is not a multiple of 16"),
        (tiled_spec(global_strides=(1 << 40, 4)), "outside 1 .. 2"),
        (tiled_spec(global_dims=(0, 192)), "TMA global dimension 0 along dim 0"),
        (tiled_spec(box_dims=(64, 64)), "spans 256 bytes, more than the 128-byte swizzle span"),
        (tiled_spec(box_dims=(64, 3), swizzle_bytes=0), "spans 12 bytes .3 x 4.; TMA needs a multiple of 16"),
        (tiled_spec(dtype_code=13), "TMA data type code 13 is not one Hopper supports"),
        (tiled_spec(element_bytes=2), "element size 2 bytes does not match TMA data type code 7"),
        (tiled_spec(global_strides=(768, 8)), "innermost global stride is 8 bytes"),
        (tiled_spec(global_strides=(4,)), "1 global strides for 2 dims"),
        (tiled_spec(box_dims=(64,)), "1 box dims for 2 global dims"),
        (tiled_spec(element_strides=(9, 1)), "TMA element stride 9 along dim 0 is outside 1 .. 8"),
        (tiled_spec(element_strides=(1,)), "1 element strides for 2 dims"),
        (tiled_spec(swizzle_bytes=16), "swizzle of 16 bytes"),
        (tiled_spec(l2_promotion_bytes=32), "L2 promotion of 32 bytes"),
        (tiled_spec(dtype_code=dtypes.TMA_UINT32, oob_nan=True),
         "NaN out-of-bounds fill needs a floating-point"),
        (tiled_spec(base_offset_bytes=8), "base offset 8 bytes is not a non-negative multiple of 16"),
        (_im2col(global_dims=(16, 64), global_strides=(128, 2)),
         "an im2col TMA descriptor has rank 3 to 5, not 2"),
        (_im2col(lower_corner=(-1,)),
         "the lower corner has 1 entries; a rank-4 im2col map has 2 spatial dims"),
        (_im2col(upper_corner=(0, 128)),
         r"upper corner offset 128 along spatial dim 1 is outside -128 .. 127"),
        (_im2col(channels_per_pixel=300), "300 channels per pixel is outside 1 .. 256"),
        (_im2col(pixels_per_column=2000), "2000 pixels per column is outside 1 .. 1024"),
        (_im2col(channels_per_pixel=128), "128 channels per pixel span 256 bytes, more than the 128-byte"),
    ],
)
def test_spec_rules_are_named(spec, message):
    with pytest.raises(CopyError, match=message) as caught:
        tensormap.validate_spec(spec, index=3)
    kind = "im2col" if isinstance(spec, Im2colTensorMapSpec) else "tiled"
    assert caught.value.message.startswith(f"TMA descriptor 3 ({kind}, argument {spec.arg_index}): ")


def test_footprint_is_the_reach_of_the_descriptor():
    assert view_extent_bytes(tiled_spec()) == 256 * 192 * 4
    assert view_extent_bytes(tiled_spec(global_dims=(4, 8), global_strides=(256, 4), base_offset_bytes=64)) \
        == 64 + 3 * 256 + 7 * 4 + 4


def test_encode_arguments_are_innermost_first():
    tiled = tensormap.encode_arguments(
        tiled_spec(element_strides=(2, 1), l2_promotion_bytes=128, oob_nan=True))
    assert (tiled.data_type, tiled.rank) == (F32, 2)
    assert tiled.global_dims == (192, 256) and tiled.global_strides == (768,) and tiled.box_dims == (32, 64)
    assert tiled.element_strides == (1, 2)
    assert (tiled.swizzle, tiled.l2_promotion, tiled.oob_fill) == (3, 2, 1)
    im2col = tensormap.encode_arguments(_im2col(lower_corner=(-2, -1), upper_corner=(1, 0)))
    assert im2col.global_dims == (64, 16, 16, 2)
    assert im2col.global_strides == (128, 16 * 64 * 2, 16 * 16 * 64 * 2)
    assert im2col.lower_corner == (-1, -2) and im2col.upper_corner == (0, 1)  # (W, H), as the driver wants
    assert ((im2col.channels_per_pixel, im2col.pixels_per_column, im2col.element_strides)
            == (64, 128, (1, 1, 1, 1)))


def test_encoder_builds_driver_arguments_and_checks_the_address():
    encoder = tensormap.TensorMapEncoder(tiled_spec(), index=2)
    with pytest.raises(CopyError,
                       match=r"TMA descriptor 2 .*global address 0x7f0000000008 is not 16-byte aligned"):
        encoder.encode(0x7F0000000008)
    with pytest.raises(CopyError, match="box dimension 300"):
        tensormap.TensorMapEncoder(tiled_spec(box_dims=(300, 32)))


def test_a_rank_1_map_passes_the_driver_one_stride():
    # An empty list reaches the driver as a null pointer, which it refuses even at rank 1 (H200).
    encoder = tensormap.TensorMapEncoder(tiled_spec(global_dims=(20,), global_strides=(4,), box_dims=(16,)))
    dims, strides = encoder._tail[:2]
    assert [int(d) for d in dims] == [20] and [int(s) for s in strides] == [80]


def test_tensor_map_cache_encodes_each_address_once(monkeypatch):
    spec = tiled_spec(base_offset_bytes=256)
    cache = tensormap.TensorMapCache(spec, lambda address: fake_image(5, address))
    first = cache.image(0x10000)
    assert first.address % 64 == 0 and first.data() == fake_image(5, 0x10000 + 256)
    assert cache.image(0x10000) is first and cache.encode_count == 1
    cache.image(0x20000)
    assert cache.encode_count == 2
    monkeypatch.setattr(cache, "capacity", 2)
    cache.image(0x30000)
    assert set(cache.images) == {0x30000}
