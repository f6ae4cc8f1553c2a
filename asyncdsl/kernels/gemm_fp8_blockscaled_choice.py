"""The tiles of the block-scaled fp8 GEMM (`asyncdsl.kernels.gemm_fp8_blockscaled`) for a
problem, and the constexprs its kernels take from them:

    from asyncdsl.kernels.gemm_fp8_blockscaled_choice import choose

    choose(4096, 2112, 7168, ctas=132)   # GemmConfig(BM=128, BN=64, ...): 8 whole waves
"""

from __future__ import annotations

from asyncdsl.blocks.gemm_config import GemmConfig

BLOCK = 128  # the scales' block of K (and of b's rows)
# A 128 x 64 tile's time in a 128 x 128 one's: half the b slice and the products, the same a slice
# and per-step work (barriers, scales, promotion) a step.
_HALF_TILE = 0.55


def choose(m: int, n: int, k: int, ctas: int) -> GemmConfig:
    """The configuration for an m x n x k product on `ctas` CTAs: 128 x 128 tiles, or 128 x 64 ones
    where those finish sooner, their waves counted (4096 x 2112: 544 tiles of 128 x 128 make 4.1
    waves of 132, 1,056 of 128 x 64 make 8 whole ones); 64-row tiles (consumers halving the
    columns) where M is small; split K, two to four ways, where the tiles make less than half a
    wave and K is long enough to share."""
    bm = 64 if m <= 64 else 128

    def tiles(bn):
        return -(-m // bm) * -(-n // bn)

    def waves(bn):
        return -(-tiles(bn) // ctas)

    bn = 64 if bm == 128 and waves(64) * _HALF_TILE < waves(128) else 128
    k_blocks, split = -(-k // BLOCK), 1
    while split < 4 and tiles(bn) * split * 2 <= ctas and k_blocks >= 8 * split * 2:
        split *= 2
    return GemmConfig(BM=bm, BN=bn, BK=BLOCK, STAGES=5 if (bm, bn) == (128, 128) else 7,
                      SPLIT="n" if bm == 64 else "m", SPLIT_K=split)


def constexprs(config: GemmConfig) -> dict:
    """The kernel's constexprs of `config`."""
    return {"BM": config.BM, "BN": config.BN, "STAGES": config.STAGES, "SPLIT": config.SPLIT,
            "SNAKE": config.SNAKE, **({"SPLIT_K": config.SPLIT_K} if config.SPLIT_K > 1 else {})}
