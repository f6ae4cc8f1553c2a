"""GEMMs with fused epilogues: c = activation(a @ b + bias) in bf16, in one kernel:
`c = asyncdsl.kernels.gemm_bias_activation(a, b, bias, "gelu")`.

The cooperative GEMM of `asyncdsl.kernels.gemm_cooperative` with an epilogue function: while a tile's last
wgmma runs, each consumer loads its columns' bias (64 a piece, in the accumulator's column
layout); each 64 x 64 piece of the float32 accumulator then gets its bias added and the
activation applied in registers before it is converted and stored
(`asyncdsl.blocks.epilogue_functions`).  The product never goes to memory in float32 and is not
read back, which an `addmm` followed by a `gelu` does.  GELU is the tanh form (torch's
`approximate="tanh"`), SiLU x·sigmoid(x) through the same `tanh.approx`.

`gemm_fp8_rows` quantises the product instead: each row of each tile is scaled by 448 over its
largest magnitude (computed in registers once the tile's sum is done) and stored as e4m3, its
scale beside it, the activation format of fp8 GEMMs that follow.
"""

from __future__ import annotations

from asyncdsl.blocks.epilogue_functions import ACTIVATIONS, activation, column_vector
from asyncdsl.blocks.epilogues import piece_of
from asyncdsl.blocks.gemm_config import GemmConfig
from asyncdsl.blocks.shapes import product_shape
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, multiprocessors, on_host, on_stream
from asyncdsl.kernels.gemm_choice import choose
from asyncdsl.kernels.gemm_cooperative import INTERPRETED_CTAS, cooperative
from asyncdsl.kernels.gemm_cooperative import example_inputs as _integer_inputs
from asyncdsl.kernels.outputs import apart, empty

E4M3_MAX = 448.0  # the largest finite float8_e4m3fn


@on_stream
def gemm_bias_activation(a, b, bias, activation_name: str = "gelu", *, out=None, ctas: int | None = None,
                         stream=None):
    """c = activation(a @ b + bias) for bfloat16 a (M, K), b (K, N) and bias (N,), in a new
    bfloat16 (M, N) array or `out`; activation "gelu", "silu", "relu" or "none"."""
    if activation_name not in ACTIVATIONS:
        raise ArgumentError(f"activation must be one of {ACTIVATIONS}, got {activation_name!r}",
                            user_location())
    m, n, k = product_shape(a, b)
    c = empty(a, (m, n), a.dtype) if out is None else apart(out, a=a, b=b, bias=bias)
    ctas = ctas or (INTERPRETED_CTAS if on_host(a) else multiprocessors(a) // 2 * 2)
    config = choose(m, n, k, ctas)
    if config.SPLIT_K > 1:  # the epilogue needs whole sums: tiles that split no K
        config = config.with_(SPLIT_K=1)
    launch(matmul_bias_activation, a, b, bias, c, stream=stream, CTAS=ctas, BN=config.BN,
           STAGES=config.STAGES, ACTIVATION=activation_name)
    return c


@kernel(grid=lambda a, b, bias, c, CTAS, **_: (CTAS,), block=384)
def matmul_bias_activation(a, b, bias, c, CTAS: constexpr, BM: constexpr = 128, BN: constexpr = 256,
                           BK: constexpr = 64, STAGES: constexpr = 4, SNAKE: constexpr = 16,
                           ACTIVATION: constexpr = "gelu"):
    if tuple(bias.shape) != (b.shape[1],) or bias.dtype not in (ad.bfloat16, ad.float16, ad.float32):
        raise ad.TraceError(f"bias must be one value a column of c: shape ({b.shape[1]},), got "
                            f"{bias.dtype} {tuple(bias.shape)}")
    if ACTIVATION not in ACTIVATIONS:
        raise ad.TraceError(f"ACTIVATION must be one of {ACTIVATIONS}, got {ACTIVATION!r}")

    def epilogue(acc, row, col):
        biases = [v.astype(ad.float32) for v in column_vector(bias, col, acc.shape[1])]
        return lambda i, j: activation(piece_of(acc, i, j) + biases[j], ACTIVATION)

    cooperative(a, b, c, CTAS, GemmConfig(BM, BN, BK, STAGES, SNAKE=SNAKE), epilogue=epilogue)


@on_stream
def gemm_fp8_rows(a, b, *, ctas: int | None = None, stream=None):
    """(q, scales): a @ b for bfloat16 a (M, K) and b (K, N) quantised to float8_e4m3fn with one
    float32 scale per row of each 256-wide tile, scales (M, ceil(N / 256)): q[i, j] · scales[i,
    j // 256] is the product rounded to e4m3, the tile row's largest magnitude mapped to 448."""
    m, n, _ = product_shape(a, b)
    q, scales = empty(a, (m, n), ad.float8_e4m3fn), empty(a, (m, -(-n // 256)), ad.float32)
    ctas = ctas or (INTERPRETED_CTAS if on_host(a) else multiprocessors(a) // 2 * 2)
    launch(matmul_fp8_rows, a, b, q, scales, stream=stream, CTAS=ctas)
    return q, scales


@kernel(grid=lambda a, b, q, scales, CTAS, **_: (CTAS,), block=384)
def matmul_fp8_rows(a, b, q, scales, CTAS: constexpr, BN: constexpr = 256, BK: constexpr = 64,
                    STAGES: constexpr = 4, SNAKE: constexpr = 16):
    if BN % 128:
        raise ad.TraceError(f"BN must be a multiple of 128 (128-byte rows of e4m3 pieces), got {BN!r}")
    if tuple(scales.shape) != (a.shape[0], ad.cdiv(b.shape[1], BN)) or scales.dtype != ad.float32:
        raise ad.TraceError(f"scales must be float32 ({a.shape[0]}, {ad.cdiv(b.shape[1], BN)}): one a row of "
                            f"each {BN}-wide tile, got {scales.dtype} {tuple(scales.shape)}")

    def epilogue(acc, row, col):
        inverse = []  # computed at the first piece, once the tile's last wgmma is done

        def piece(i, j):
            if not inverse:
                amax = ad.maximum(abs(acc[...]).max(axis=1, keepdims=True), 1e-30)
                ad.store(scales.at[ad.ds(row, acc.shape[0]), ad.ds(col // BN, 1)], amax * (1 / E4M3_MAX))
                inverse.append(E4M3_MAX / amax)
            return piece_of(acc, i, j, 128) * inverse[0]
        return piece

    cooperative(a, b, q, CTAS, GemmConfig(128, BN, BK, STAGES, SNAKE=SNAKE), epilogue=epilogue, width=128)


def example_inputs(specs, rng) -> list:
    """Small integers for a and b (exact sums), a bias of quarters, c NaN."""
    a, b, bias, c = specs
    operands = _integer_inputs((a, b, c), rng)
    quarters = (rng.integers(-8, 9, bias.shape) / 4).astype(bias.dtype.numpy)
    return [operands[0], operands[1], quarters, operands[2]]


EXAMPLE_ARGS = {
    "matmul_bias_activation": ((ArraySpec((256, 320), ad.bfloat16), ArraySpec((320, 512), ad.bfloat16),
                                ArraySpec((512,), ad.bfloat16), ArraySpec((256, 512), ad.bfloat16)),
                               {"CTAS": 3, "ACTIVATION": "gelu"}),
}
