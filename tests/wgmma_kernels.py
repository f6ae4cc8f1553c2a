"""wgmma kernels shared by the CPU suites (interpreter vs numpy, ptxas) and the GPU suite (GPU vs
interpreter, bit for bit): one warpgroup loads A and B whole by TMA into buffers laid out for the
tensor cores, multiplies them once, and stores the accumulator.

A case names each operand's *major* (which dim is contiguous in memory): a K-major A is stored
(M, K), an MN-major one (K, M) and passed as `a_s.T`; an MN-major B is stored (K, N), a K-major
one (N, K) and passed as `b_s.T`.  `a_in_registers` loads A into a `WGMMA` register tile first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

import asyncdsl as ad
from asyncdsl import TileTransform


@dataclass(frozen=True)
class Case:
    m: int
    n: int
    k: int
    a_dtype: ad.DType = ad.bfloat16
    b_dtype: ad.DType = ad.bfloat16
    a_k_major: bool = True
    b_k_major: bool = False
    swizzle: int = 128
    a_in_registers: bool = False

    @property
    def acc_dtype(self) -> ad.DType:
        return ad.int32 if self.a_dtype in (ad.int8, ad.uint8) else ad.float32

    @property
    def a_shape(self) -> tuple[int, int]:
        return (self.m, self.k) if self.a_k_major else (self.k, self.m)

    @property
    def b_shape(self) -> tuple[int, int]:
        return (self.n, self.k) if self.b_k_major else (self.k, self.n)

    def __str__(self) -> str:
        a = "regs" if self.a_in_registers else ("K" if self.a_k_major else "MN")
        return (f"m{self.m}n{self.n}k{self.k}-{self.a_dtype}x{self.b_dtype}-A{a}"
                f"-B{'K' if self.b_k_major else 'MN'}-sw{self.swizzle}")


def _layout(dtype: ad.DType, swizzle: int) -> dict:
    return dict(transforms=TileTransform((8, swizzle // dtype.itemsize)), swizzle=swizzle)


@ad.kernel(grid=(1,), block=128)
def single_mma(a, b, c, M: ad.constexpr, N: ad.constexpr, A_K_MAJOR: ad.constexpr, B_K_MAJOR: ad.constexpr,
               SWIZZLE: ad.constexpr, A_IN_REGISTERS: ad.constexpr):
    a_s = ad.smem(a.shape, a.dtype, **_layout(a.dtype, SWIZZLE))
    b_s = ad.smem(b.shape, b.dtype, **_layout(b.dtype, SWIZZLE))
    loaded = ad.barrier(arrival_count=2)
    ad.async_copy(a, a_s, barrier=loaded)
    ad.async_copy(b, b_s, barrier=loaded)
    loaded.wait()
    acc = ad.registers((M, N), c.dtype, layout=ad.WGMMA)
    a_operand = a_s if A_K_MAJOR else a_s.T
    if A_IN_REGISTERS:
        a_operand = ad.load(a_s, layout=ad.WGMMA)
    ad.wgmma(acc, a_operand, b_s.T if B_K_MAJOR else b_s, accumulate=False)
    ad.wgmma_wait(0)
    ad.store(c, acc[...])


def run(case: Case, a: np.ndarray, b: np.ndarray, c: np.ndarray, interpret: bool) -> None:
    call = single_mma.interpret if interpret else single_mma
    call(a, b, c, case.m, case.n, case.a_k_major, case.b_k_major, case.swizzle, case.a_in_registers)


def ptx(case: Case) -> str:
    a = np.zeros(case.a_shape, case.a_dtype.numpy)
    b = np.zeros(case.b_shape, case.b_dtype.numpy)
    c = np.zeros((case.m, case.n), case.acc_dtype.numpy)
    return single_mma.ptx(a, b, c, case.m, case.n, case.a_k_major, case.b_k_major, case.swizzle,
                          case.a_in_registers)


def integer_inputs(case: Case, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Small integers: every product and partial sum is exact in float32, so any order of
    summation (the hardware's included) gives the same bits."""
    rng = np.random.default_rng(seed)
    low = 0 if ad.uint8 in (case.a_dtype, case.b_dtype) else -4
    a = rng.integers(low, 5, case.a_shape).astype(case.a_dtype.numpy)
    b = rng.integers(low, 5, case.b_shape).astype(case.b_dtype.numpy)
    return a, b


def random_inputs(case: Case, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random normal inputs in the case's dtypes: sums that round, where the tensor cores'
    arithmetic shows."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(case.a_shape).astype(case.a_dtype.numpy)
    b = rng.standard_normal(case.b_shape).astype(case.b_dtype.numpy)
    return a, b


def reference(case: Case, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in float64 (exact for the integer inputs), from the stored matrices."""
    a64 = a.astype(np.float64) if case.a_k_major else a.astype(np.float64).T
    b64 = b.astype(np.float64).T if case.b_k_major else b.astype(np.float64)
    return a64 @ b64


_BF16, _F16, _E4M3, _E5M2 = ad.bfloat16, ad.float16, ad.float8_e4m3fn, ad.float8_e5m2
# Every operand major and swizzle for 16-bit types, every N class, both M; the other types K-major.
CASES = tuple(
    [Case(64, n, 64, b_k_major=n < 64) for n in (8, 16, 64, 128, 192, 256)]
    + [Case(128, n, 128) for n in (64, 128)]
    + [Case(64, 64, 64, a_k_major=ak, b_k_major=bk, swizzle=sw)
       for ak in (True, False) for bk in (True, False) for sw in (32, 64, 128)]
    + [Case(128, 128, 64, a_k_major=False, b_k_major=False), Case(64, 256, 32, b_k_major=False, swizzle=64)]
    + [Case(64, 128, 64, a_in_registers=True), Case(128, 64, 128, a_in_registers=True, b_k_major=True)]
    + [Case(64, 64, 64, _F16, _F16, b_k_major=True), Case(128, 128, 64, _F16, _F16, a_k_major=False)]
    + [Case(64, 64, 64, ad.float32, ad.float32, b_k_major=True), Case(64, 128, 64, ad.float32, ad.float32,
                                                                   b_k_major=True, swizzle=64)]
    + [Case(64, n, 128, x, y, b_k_major=True) for x, y, n in ((_E4M3, _E4M3, 64), (_E5M2, _E4M3, 128),
                                                              (_E4M3, _E5M2, 256))]
    + [Case(64, n, 128, x, y, b_k_major=True) for x, y, n in ((ad.int8, ad.int8, 64), (ad.uint8, ad.int8, 48),
                                                              (ad.int8, ad.uint8, 128),
                                                              (ad.uint8, ad.uint8, 256))]
)


@st.composite
def cases(draw):
    """Any single-wgmma kernel the tensor cores can run: types, majors, swizzle, M, N, K, register A."""
    kinds = [(ad.bfloat16, ad.bfloat16), (ad.float16, ad.float16), (ad.float32, ad.float32),
             (ad.float8_e4m3fn, ad.float8_e5m2), (ad.int8, ad.uint8)]
    a_dtype, b_dtype = draw(st.sampled_from(kinds))
    sixteen = a_dtype.bits == 16
    swizzle = draw(st.sampled_from((32, 64, 128)))
    per_row = swizzle // a_dtype.itemsize
    a_k_major = not sixteen or draw(st.booleans())
    b_k_major = not sixteen or draw(st.booleans())
    in_registers = sixteen and a_k_major and draw(st.booleans())
    instruction_k = {16: 16, 32: 8, 8: 32}[a_dtype.bits]
    k = max(instruction_k, per_row if (a_k_major or b_k_major) else 8) * draw(st.integers(1, 2))
    n_unit = per_row if not b_k_major else (16 if a_dtype.kind == "int" else 8)
    m = 64 * draw(st.integers(1, 2))
    widest = 256 if m == 64 else 224  # M x N / 128 accumulator registers must leave room (hw.wgmma)
    n = n_unit * draw(st.integers(1, widest // n_unit))
    return Case(m, n, k, a_dtype, b_dtype, a_k_major, b_k_major, swizzle, in_registers)
