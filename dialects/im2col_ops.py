"""im2col copies in the `asyncdsl` dialect: the user's `async_copy_im2col`, the hardware's
`cp.async.bulk.tensor ... .im2col` load, and the im2col descriptor the host encodes.

An im2col copy loads, into each row of an SMEM buffer, the channels of one pixel of one
convolution window of a channels-last image batch (`asyncdsl.interpret.im2col` says which).
The user-level op keeps what the user wrote; `resolve-transforms` turns it into one
`asyncdsl.tma_load_im2col` whose `#asyncdsl.im2col_desc` mirrors `Im2colTensorMapSpec`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IndexType, IntAttr, IntegerAttr
from xdsl.dialects.builtin import MemRefType, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_attr_definition, irdl_op_definition
from xdsl.irdl import operand_def, prop_def, var_operand_def
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.copy_bases import Arrives, BarrierTarget, CopySides, DescriptorSlot, Predicated
from asyncdsl.dialects.copy_bases import TxCounted
from asyncdsl.dialects.descriptor_attrs import BOX_ENCODING_FIELDS, TENSOR_FIELDS, DescriptorAttr
from asyncdsl.dialects.descriptor_attrs import DescriptorField
from asyncdsl.dialects.ir_utils import bool_prop, constant_value, element_bits, int_prop, is_gmem, is_smem
from asyncdsl.dialects.ir_utils import SegmentedOperands
from asyncdsl.dialects.ir_utils import memref_type, optional_operand, shape_of, verify_coordinates
from asyncdsl.dialects.ir_utils import verify_same_element_type, verify_swizzle, verify_swizzled_row
from asyncdsl.hw.im2col import corner_range, offset_bits, offset_range
from asyncdsl.hw.limits import GMEM_STRIDE_ALIGNMENT, IM2COL_IMAGE_RANKS, IM2COL_MAX_CHANNELS
from asyncdsl.hw.limits import IM2COL_MAX_PIXELS, MAX_ELEMENT_STRIDE
from asyncdsl.kernel_binary import Im2colTensorMapSpec

# The keywords of `#asyncdsl.im2col_desc`, one per `Im2colTensorMapSpec` field, in printing order.
_IM2COL_FIELDS = (
    *TENSOR_FIELDS,
    DescriptorField("lower", "lower_corner", "ints"),
    DescriptorField("upper", "upper_corner", "ints"),
    DescriptorField("channels", "channels_per_pixel"),
    DescriptorField("pixels", "pixels_per_column"),
    *BOX_ENCODING_FIELDS,
)


@irdl_attr_definition
class Im2colDescriptorAttr(DescriptorAttr):
    """One im2col TMA descriptor as the host will encode it (see `Im2colTensorMapSpec`), printed
    with keywords: `#asyncdsl.im2col_desc<arg = 0, dtype = 7, ..., lower = [-1, -1], ...>`."""

    name = "asyncdsl.im2col_desc"
    SPEC = Im2colTensorMapSpec
    FIELDS = _IM2COL_FIELDS

    arg_index: IntAttr
    dtype_code: IntAttr
    element_bytes: IntAttr
    global_dims: ArrayAttr[IntAttr]
    global_strides: ArrayAttr[IntAttr]
    lower_corner: ArrayAttr[IntAttr]
    upper_corner: ArrayAttr[IntAttr]
    channels_per_pixel: IntAttr
    pixels_per_column: IntAttr
    element_strides: ArrayAttr[IntAttr]
    swizzle_bytes: IntAttr
    oob_nan: IntAttr
    l2_promotion_bytes: IntAttr
    base_offset_bytes: IntAttr


class _WalkStart(IRDLOperation):
    """Where the walk of convolution windows begins, `(n, *window start, c)` in array order."""

    starts = var_operand_def(IndexType)


class _FilterTap(IRDLOperation):
    """The filter tap: one offset per spatial dim, added to each window's start."""

    offsets = var_operand_def(IndexType)


@irdl_op_definition
class AsyncCopyIm2colOp(
    CopySides, _WalkStart, _FilterTap, BarrierTarget, Predicated, Arrives, SegmentedOperands
):
    """Load the im2col rows of a channels-last image batch into an SMEM buffer, as the user wrote it.

    `source` is the whole image batch `(N, [D,] [H,] W, C)`; `destination` has shape
    `(*rows, channels)`, its leading dims flattened into the rows (pixels). `starts` is
    `(n, *window start, c)`: where the walk of windows begins; `offsets` is the filter tap, one
    per spatial dim. Along spatial dim i windows start at `window_lower[i]`,
    `window_lower[i] + window_strides[i]`, ... up to `size + window_upper[i] - 1`. The copy
    completes on `barriers[barrier_index]`; `arrive` makes the warpgroup arrive with expect-tx of
    its bytes.
    """

    name = "asyncdsl.async_copy_im2col"

    window_lower = prop_def(DenseArrayBase)
    window_upper = prop_def(DenseArrayBase)
    window_strides = prop_def(DenseArrayBase)
    swizzle = prop_def(IntegerAttr)

    def __init__(
        self, source: SSAValue, destination: SSAValue, starts: Sequence[SSAValue],
        offsets: Sequence[SSAValue], barriers: SSAValue, barrier_index: SSAValue, *,
        window_bounds: Sequence[tuple[int, int]], window_strides: Sequence[int], swizzle: int = 0,
        arrive: bool = True, predicate: SSAValue | None = None,
    ):
        super().__init__(
            operands=[
                source, destination, starts, offsets, barriers, barrier_index, optional_operand(predicate),
            ],
            properties={
                "window_lower": DenseArrayBase.from_list(i64, [low for low, _ in window_bounds]),
                "window_upper": DenseArrayBase.from_list(i64, [high for _, high in window_bounds]),
                "window_strides": DenseArrayBase.from_list(i64, list(window_strides)),
                "swizzle": int_prop(swizzle),
                "arrive": bool_prop(arrive),
            },
        )

    @property
    def lower(self) -> tuple[int, ...]:
        return tuple(self.window_lower.get_values())

    @property
    def upper(self) -> tuple[int, ...]:
        return tuple(self.window_upper.get_values())

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(self.window_strides.get_values())

    @property
    def pixels(self) -> int:
        """Rows of the destination: one pixel of one window each."""
        count = 1
        for d in shape_of(self.destination)[:-1]:
            count *= d
        return count

    @property
    def channels(self) -> int:
        return shape_of(self.destination)[-1]

    def verify_(self) -> None:
        if not (is_gmem(self.source.type) and is_smem(self.destination.type)):
            raise VerifyException(
                "async_copy_im2col loads from a GMEM image batch (a kernel array argument) into a "
                "shared-memory buffer"
            )
        verify_same_element_type(
            "async_copy_im2col", memref_type(self.source.type), memref_type(self.destination.type))
        bits = element_bits(self.source.type)
        if bits < 8:
            raise VerifyException(
                f"im2col TMA has no sub-byte element type: {bits}-bit elements cannot be copied")
        image = shape_of(self.source)
        rank = len(image)
        if rank not in IM2COL_IMAGE_RANKS:
            raise VerifyException(
                f"im2col copies read channels-last image batches of rank 3, 4 or 5 ((N, W, C), "
                f"(N, H, W, C), (N, D, H, W, C)), got rank {rank} (shape {image})"
            )
        spatial = rank - 2
        self._verify_window(image)
        if len(self.starts) != rank:
            raise VerifyException(
                f"start_indices needs {rank} entries (n, {spatial} spatial, c) for a rank-{rank} image "
                f"batch, got {len(self.starts)}"
            )
        verify_coordinates(self.starts, "start index")
        if len(self.offsets) != spatial:
            raise VerifyException(
                f"filter_offsets needs one entry per spatial dim ({spatial}), got {len(self.offsets)}"
            )
        low, high = offset_range(rank)
        for dim, offset in enumerate(self.offsets):
            known = constant_value(offset)
            if known is not None and not low <= known <= high:
                raise VerifyException(
                    f"filter offset {known} along spatial dim {dim} is outside [{low}, {high}], the "
                    f"{offset_bits(rank)}-bit range of a rank-{rank} im2col copy"
                )
        for dim, (start, first, size, top) in enumerate(
                zip(self.starts[1:-1], self.lower, image[1:-1], self.upper)):
            known = constant_value(start)
            last = size - 1 + top
            if known is not None and not first <= known <= last:
                raise VerifyException(
                    f"start index {known} along spatial dim {dim} lies outside the window starts "
                    f"[{first}, {last}] the window bounds allow: the walk must begin inside them"
                )
        self._verify_destination(image, bits)

    def _verify_window(self, image: tuple[int, ...]) -> None:
        rank = len(image)
        spatial = rank - 2
        lower, upper, strides = self.lower, self.upper, self.strides
        if len(lower) != spatial or len(upper) != spatial:
            raise VerifyException(
                f"window_start_bounds needs one (lo, hi) pair per spatial dim ({spatial} for a rank-{rank} "
                f"image batch), got {len(lower)}"
            )
        smallest, largest = corner_range(rank)
        for dim, (low, high, size) in enumerate(zip(lower, upper, image[1:-1])):
            if not (smallest <= low <= largest and smallest <= high <= largest):
                raise VerifyException(
                    f"window_start_bounds along spatial dim {dim} must be in [{smallest}, {largest}] for "
                    f"rank {rank}, got ({low}, {high})"
                )
            if size + high - low < 1:
                raise VerifyException(
                    f"window_start_bounds ({low}, {high}) along spatial dim {dim} of size {size} leave no "
                    f"window start: [{low}, {size + high - 1}] is empty"
                )
        if len(strides) != spatial:
            raise VerifyException(f"window_strides needs {spatial} entries, got {len(strides)}")
        for dim, stride in enumerate(strides):
            if not 1 <= stride <= MAX_ELEMENT_STRIDE:
                raise VerifyException(
                    f"window stride {stride} along spatial dim {dim} is outside [1, {MAX_ELEMENT_STRIDE}]"
                )

    def _verify_destination(self, image: tuple[int, ...], bits: int) -> None:
        smem = shape_of(self.destination)
        if len(smem) < 2:
            raise VerifyException(
                f"the im2col destination needs rank >= 2 (rows of pixels, then channels), got shape {smem}"
            )
        if not 1 <= self.pixels <= IM2COL_MAX_PIXELS:
            raise VerifyException(
                f"the im2col destination has {self.pixels} rows (pixels); one copy loads 1 to "
                f"{IM2COL_MAX_PIXELS}"
            )
        if not 1 <= self.channels <= IM2COL_MAX_CHANNELS:
            raise VerifyException(
                f"the im2col destination has {self.channels} columns (channels); one copy loads 1 to "
                f"{IM2COL_MAX_CHANNELS}"
            )
        item = bits // 8
        pixel_bytes = image[-1] * item
        if pixel_bytes % GMEM_STRIDE_ALIGNMENT:
            raise VerifyException(
                f"GMEM stride {pixel_bytes} bytes between pixels ({image[-1]} channels x {item} bytes) is "
                f"not a multiple of {GMEM_STRIDE_ALIGNMENT}"
            )
        row_bytes = self.channels * item
        if row_bytes % GMEM_STRIDE_ALIGNMENT:
            raise VerifyException(
                f"an im2col row of {self.channels} channels spans {row_bytes} bytes; TMA needs a multiple "
                f"of {GMEM_STRIDE_ALIGNMENT}"
            )
        swizzle = self.swizzle.value.data
        verify_swizzle(swizzle)
        verify_swizzled_row(swizzle, self.channels, item, "channels")


@irdl_op_definition
class TmaIm2colLoadOp(_FilterTap, DescriptorSlot, TxCounted, Predicated, SegmentedOperands):
    """One `cp.async.bulk.tensor ... .im2col` load: the rows the descriptor's walk gives from
    `coords` (array order `(n, *start, c)`) with im2col `offsets` (array order), into `smem`,
    completing `expect_tx_bytes` on `barriers[barrier_index]` (0: the user arrives)."""

    name = "asyncdsl.tma_load_im2col"

    smem = operand_def(MemRefType)
    coords = var_operand_def(IndexType)

    descriptor = prop_def(Im2colDescriptorAttr)

    def __init__(
        self, smem: SSAValue, coords: Sequence[SSAValue], offsets: Sequence[SSAValue], barriers: SSAValue,
        barrier_index: SSAValue, descriptor: Im2colDescriptorAttr, expect_tx_bytes: int,
        predicate: SSAValue | None = None,
    ):
        properties: dict[str, Attribute] = {"descriptor": descriptor,
                                            "expect_tx_bytes": int_prop(expect_tx_bytes)}
        super().__init__(
            operands=[smem, coords, offsets, barriers, barrier_index, optional_operand(predicate)],
            properties=properties,
        )

    def verify_(self) -> None:
        spec = self.descriptor.spec()
        if not is_smem(self.smem.type):
            raise VerifyException("an im2col load's destination must be a shared-memory buffer")
        if len(self.coords) != spec.rank or len(self.offsets) != spec.rank - 2:
            raise VerifyException(
                f"a rank-{spec.rank} im2col descriptor takes {spec.rank} coordinates and {spec.rank - 2} "
                f"offsets, got {len(self.coords)} and {len(self.offsets)}"
            )
        elements = 1
        for d in shape_of(self.smem):
            elements *= d
        if elements != spec.pixels_per_column * spec.channels_per_pixel:
            raise VerifyException(
                f"the SMEM buffer holds {elements} elements but one im2col load delivers "
                f"{spec.pixels_per_column} pixels x {spec.channels_per_pixel} channels"
            )


ATTRIBUTES: tuple[type[Attribute], ...] = (Im2colDescriptorAttr,)
OPERATIONS: tuple[type[Operation], ...] = (AsyncCopyIm2colOp, TmaIm2colLoadOp)
