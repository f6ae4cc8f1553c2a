"""What the paged decode (`asyncdsl.kernels.paged_decode`) takes, refused at the caller's line
(its host function's arguments) or at trace time otherwise, and its scales as the kernel reads them."""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks.paged_loads import GATHERS
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.hw.limits import SMEM_ALIGNMENT_SLACK
from asyncdsl.hw.occupancy import smem_per_cta
from asyncdsl.kernels.dispatch import on_host

PAGE_SIZES = (16, 64)
ROWS = 64  # rows of the wgmma tile: query heads of a group times queries, padded


def check_arguments(q, k_cache, block_table, splits, ctas_per_sm, gather="tma") -> None:
    """Refuse host function arguments the decode does not take, at the caller's line."""
    if len(q.shape) not in (3, 4):
        raise ad.ArgumentError(f"q is (B, H, D) or (B, Q, H, D), got {tuple(q.shape)}", user_location())
    if len(k_cache.shape) != 4 or len(block_table.shape) != 2:
        raise ad.ArgumentError(f"the caches are (pages, page_size, H_kv, D) and the block table (B, "
                               f"max_pages), got {tuple(k_cache.shape)} and {tuple(block_table.shape)}",
                               user_location())
    if ctas_per_sm is not None and (ctas_per_sm not in (1, 2, 3, 4) or isinstance(ctas_per_sm, bool)):
        raise ad.ArgumentError(f"ctas_per_sm, the CTAs a multiprocessor the splits are planned for, must "
                               f"be 1 to 4, got {ctas_per_sm!r}", user_location())
    if splits is not None and (not isinstance(splits, int) or isinstance(splits, bool) or splits < 1):
        raise ad.ArgumentError(f"splits, the most a sequence takes, must be a positive int or None, got "
                               f"{splits!r}", user_location())
    if gather not in GATHERS:
        raise ad.ArgumentError(f"gather, how pages reach shared memory, is one of {GATHERS}, got "
                               f"{gather!r}", user_location())


def check_shapes(q, k_cache, v_cache, block_table, seq_lens, plan, o, part, lse, BK, STAGES=None,
                 resident: int = 1) -> None:
    """Refuse at trace time what the kernel (built for `resident` CTAs a multiprocessor) does not
    compute."""
    (B, Q, H, D), (_, PAGE, H_KV, _) = q.shape, k_cache.shape
    if PAGE not in PAGE_SIZES:
        raise ad.TraceError(f"page size {PAGE}: the paged decode takes pages of "
                            f"{' or '.join(map(str, PAGE_SIZES))} positions", user_location())
    if v_cache.shape != k_cache.shape or k_cache.shape[3] != D:
        raise ad.TraceError(f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} must both "
                            f"be (pages, page_size, H_kv, {D}) for q of head dim {D}", user_location())
    caches = (ad.bfloat16, ad.float8_e4m3fn)
    if q.dtype != ad.bfloat16 or k_cache.dtype not in caches or v_cache.dtype != k_cache.dtype:
        raise ad.TraceError(f"q must be bfloat16 and the caches both bfloat16 or both float8_e4m3fn, got "
                            f"{q.dtype}, {k_cache.dtype} and {v_cache.dtype}", user_location())
    if D not in (64, 128):
        raise ad.TraceError(f"head dim {D}: the paged decode takes 64 or 128 (the output and a block's "
                            "scores share the consumer's registers)", user_location())
    if H % H_KV or Q * (H // H_KV) > ROWS:
        raise ad.TraceError(f"{H} query heads over {H_KV} KV heads with {Q} queries: the heads must group "
                            f"evenly and queries × group at most {ROWS} (one wgmma tile)", user_location())
    if block_table.shape[0] != B or tuple(seq_lens.shape) != (B,) or \
            (block_table.dtype, seq_lens.dtype) != (ad.int32, ad.int32):
        raise ad.TraceError(f"block_table must be ({B}, max_pages) int32 and seq_lens ({B},) int32, got "
                            f"{tuple(block_table.shape)} {block_table.dtype} and {tuple(seq_lens.shape)} "
                            f"{seq_lens.dtype}", user_location())
    if BK not in (32, 64):
        raise ad.TraceError(f"BK, the positions of a step, must be 32 or 64, got {BK!r}", user_location())
    if len(plan.shape) != 2 or plan.shape[0] != 5 or plan.shape[1] <= B or plan.dtype != ad.int32:
        raise ad.TraceError(f"the plan must be (5, units + {B}) int32 (blocks.balanced_splits), got "
                            f"{tuple(plan.shape)} {plan.dtype}", user_location())
    if len(part.shape) != 3 or tuple(part.shape[1:]) != (Q * H, D) or tuple(lse.shape) != part.shape[:2] or \
            (part.dtype, lse.dtype) != (ad.float32, ad.float32):
        raise ad.TraceError(f"the workspace must be float32 parts (slots, {Q * H}, {D}) and log-sum-exps "
                            f"(slots, {Q * H}), got {tuple(part.shape)} {part.dtype} and {tuple(lse.shape)} "
                            f"{lse.dtype}", user_location())
    # The ring: what shared memory holds beside q and the base's alignment slack (a CTA's share
    # where two are to fit a multiprocessor).
    most = (smem_per_cta(resident) - SMEM_ALIGNMENT_SLACK - ROWS * D * 2) // (2 * BK * D * 2)
    if STAGES is not None and (not isinstance(STAGES, int) or isinstance(STAGES, bool)
                               or not 2 <= STAGES <= most):
        raise ad.TraceError(f"STAGES, the key blocks in flight, must be an int from 2 to {most} (what shared "
                            f"memory holds of blocks of {BK} keys of head dim {D}), got {STAGES!r}",
                            user_location())
    if o.shape != q.shape:
        raise ad.TraceError(f"o has shape {tuple(o.shape)}, expected {tuple(q.shape)}", user_location())


def scales_of(q, k_scale, v_scale):
    """k_scale and v_scale (floats, or one-element float32 arrays: on the GPU, tensors keep a
    call free of host copies) as one (2,) float32 array beside q."""
    if on_host(q):
        return np.array([1.0 if s is None else np.asarray(s, np.float32).reshape(-1)[0]
                         for s in (k_scale, v_scale)], np.float32)
    import torch

    return torch.stack([torch.as_tensor(1.0 if s is None else s, dtype=torch.float32,
                                        device=q.device).reshape(()) for s in (k_scale, v_scale)])
