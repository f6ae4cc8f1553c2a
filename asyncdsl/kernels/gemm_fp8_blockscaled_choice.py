"""The tiles of the block-scaled fp8 GEMM (`asyncdsl.kernels.gemm_fp8_blockscaled`) for a
problem, and the constexprs its kernels take from them:

    from asyncdsl.kernels.gemm_fp8_blockscaled_choice import choose

    choose(64, 7168, 16384, ctas=132)   # GemmConfig(BM=64, BN=128, ..., SPLIT_K=2)
"""

from __future__ import annotations

from asyncdsl.blocks.gemm_config import GemmConfig

BLOCK = 128  # the scales' block of K (and of b's rows)


def choose(m: int, n: int, k: int, ctas: int) -> GemmConfig:
    """The configuration for an m x n x k product on `ctas` CTAs: 128 x 128 tiles; 64-row tiles
    (consumers halving the columns) where M is small; split K, two to four ways, where the tiles
    make less than half a wave and K is long enough to share.  (128 x 64 tiles, which end the
    waves of 4096 x 2112 sooner, ran at 0.77x the 128 x 128 ones there on the H200:
    docs/notes/2026-12-07-backward-and-blockscaled-run.md.)"""
    bm = 64 if m <= 64 else 128
    tiles, k_blocks, split = -(-m // bm) * -(-n // 128), -(-k // BLOCK), 1
    while split < 4 and tiles * split * 2 <= ctas and k_blocks >= 8 * split * 2:
        split *= 2
    return GemmConfig(BM=bm, BN=128, BK=BLOCK, STAGES=7 if bm == 64 else 5, SPLIT="n" if bm == 64 else "m",
                      SPLIT_K=split)


def constexprs(config: GemmConfig) -> dict:
    """The kernel's constexprs of `config`."""
    return {"BM": config.BM, "BN": config.BN, "STAGES": config.STAGES, "SPLIT": config.SPLIT,
            "SNAKE": config.SNAKE, **({"SPLIT_K": config.SPLIT_K} if config.SPLIT_K > 1 else {})}
