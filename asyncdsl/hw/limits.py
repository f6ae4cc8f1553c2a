"""Every Hopper number the compiler, the runtime and the interpreter rely on, in one place.

Each constant names its rule; `docs/hardware.md` says where the rule comes from (the PTX ISA, the
CUDA driver API, or a measurement on the H200).  Code that checks a rule imports the number from
here, so a rule is stated once.
"""

from __future__ import annotations

# -- Threads and launches (CUDA driver API, cuLaunchKernelEx; compute capability 9.0) ----------
WARPGROUP_THREADS = 128  # 4 warps of 32: the unit kernel code describes
MAX_GRID = (2**31 - 1, 65535, 65535)  # CTAs along x, y, z
MAX_BLOCK = (1024, 1024, 64)  # threads along x, y, z
MAX_THREADS_PER_BLOCK = 1024
MAX_THREADS_PER_SM = 2048  # resident on one multiprocessor at once
MAX_CTAS_PER_SM = 32
MAX_PORTABLE_CLUSTER_SIZE = 8
MAX_CLUSTER_SIZE = 16  # with the non-portable cluster size attribute
MAX_MULTICAST_CTAS = 16  # the TMA multicast ctaMask operand has 16 bits

# -- Registers (ptxas with .reqntid; setmaxnreg, PTX ISA sm_90a) ------------------------------
REGISTERS_PER_CTA = 65536  # the register file a CTA's threads share (one SM's)
MAX_REGISTERS_PER_THREAD = 255  # what ptxas gives one thread at most
REGISTER_ALLOCATION_UNIT = 8  # per-thread counts come in steps of 8 (ptxas, setmaxnreg)
SETMAXNREG_RANGE = (24, 256)  # setmaxnreg's immediate: a multiple of 8 in this range

# -- Shared memory --------------------------------------------------------------------------
MAX_SMEM_PER_BLOCK = 232448  # the opt-in maximum of dynamic shared memory per block (H100/H200)
SMEM_PER_SM = 233472  # what the CTAs resident on one multiprocessor share (H100/H200)
SMEM_RESERVED_PER_BLOCK = 1024  # taken from SMEM_PER_SM for each resident CTA, beside its own
# Dynamic shared memory is requested with this much slack, so the kernel can round its base up to
# 1024 bytes at run time (not every load path honours `.extern .shared .align 1024`).
SMEM_BASE_ALIGNMENT = 1024
SMEM_ALIGNMENT_SLACK = SMEM_BASE_ALIGNMENT
TMA_SMEM_ALIGNMENT = 128  # shared-memory operands of TMA tensor copies
BARRIER_BYTES = 8  # one mbarrier object
NAMED_BARRIERS = 16  # bar.sync ids 0..15 per CTA: 0 for the CTA, 1 + w for warpgroup w, then turns
MAX_BARRIERS_PER_GROUP = 32  # asyncdsl's own cap on one `ad.barrier(num=...)` group
MAX_ARRIVAL_COUNT = 2**20 - 1  # mbarrier.init's expected-arrival count
MAX_EXPECT_TX_BYTES = 2**20 - 1  # the tx-count an mbarrier phase can expect

# -- Swizzle (TMA, cp.async, and register loads of swizzled buffers) -------------------------
SWIZZLE_SPANS = (0, 32, 64, 128)  # bytes; 0 means no swizzle
SWIZZLE_CHUNK = 16  # bytes the swizzle moves as a unit
SWIZZLE_PERIOD = 1024  # the pattern repeats every 8 rows of 128 bytes at most

# -- TMA tensor copies (cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col) --------------------
MAX_TMA_RANK = 5
MAX_BOX_DIM = 256
GMEM_STRIDE_ALIGNMENT = 16  # bytes, for every stride but the innermost
GMEM_ADDRESS_ALIGNMENT = 16  # bytes: the base address a tensor map views
MIN_INNER_BOX_BYTES = 16  # the minor box dim must span a multiple of this
MAX_GLOBAL_DIM = 1 << 32  # elements along one dim of a tensor map's view
TMA_COORDINATE_BITS = 32  # a box origin's coordinates are signed 32-bit (docs/hardware.md §3.1)
MAX_GLOBAL_STRIDE = 1 << 40  # bytes
MAX_ELEMENT_STRIDE = 8  # traversal stride of a tensor map
DESCRIPTOR_BYTES = 128  # one CUtensorMap
DESCRIPTOR_ALIGNMENT = 64
IM2COL_IMAGE_RANKS = (3, 4, 5)  # (N, W, C), (N, H, W, C), (N, D, H, W, C)
IM2COL_MAX_CHANNELS = 256  # channelsPerPixel: columns of the SMEM destination
IM2COL_MAX_PIXELS = 1024  # pixelsPerColumn: rows of the SMEM destination
IM2COL_OFFSET_FIELD_BITS = 16  # shared by the spatial dims' offsets and corners
GATHER4_ROWS = 4  # rows one Blackwell gather4/scatter4 instruction moves
GATHER4_SMEM_ALIGNMENT = 128  # each instruction's SMEM rows start 128-byte aligned

# -- Bulk copies and cp.async ---------------------------------------------------------------
BULK_ALIGNMENT = 16  # bytes: of a cp.async.bulk's size and of both its addresses
CP_ASYNC_CHUNK_SIZES = (16, 8, 4)  # bytes one thread's cp.async moves, widest first
MAX_PENDING_GROUPS = 63  # what `cp.async.bulk.wait_group` and `cp.async.wait_group` can name
