"""Drawing a wgmma configuration the tensor cores run (docs/register-tiles.md and hw.wgmma's
rules): M = 64·k, N and K in the steps the operand layouts allow, each operand's major (16-bit
types either; tf32, 8-bit floats and integers K-major), the swizzle, A from shared memory or
registers, whether the first instruction accumulates into a loaded C, and how many calls."""

from __future__ import annotations

import random
from dataclasses import dataclass

from .model import INSTRUCTION_K

PAIRS = (
    ("bfloat16", "bfloat16", 5),
    ("float16", "float16", 3),
    ("float32", "float32", 2),
    ("float8_e4m3fn", "float8_e4m3fn", 2),
    ("float8_e5m2", "float8_e4m3fn", 1),
    ("float8_e4m3fn", "float8_e5m2", 1),
    ("int8", "int8", 1),
    ("uint8", "int8", 1),
    ("int8", "uint8", 1),
)
ITEMSIZE = {
    "bfloat16": 2,
    "float16": 2,
    "float32": 4,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
    "uint8": 1,
}


@dataclass(frozen=True)
class Config:
    m: int
    n: int
    k: int
    a_dtype: str
    b_dtype: str
    a_k_major: bool
    b_k_major: bool
    swizzle: int
    a_in_registers: bool
    accumulate: bool  # the first call adds to C loaded into the accumulator
    calls: int  # wgmma calls on the same operands (the later ones accumulate)
    scale: str  # the inputs: "ints" (exact in any order) or "normal" (where the truncation shows)

    @property
    def acc_dtype(self) -> str:
        return "int32" if self.a_dtype in ("int8", "uint8") else "float32"

    @property
    def a_shape(self) -> tuple[int, int]:
        return (self.m, self.k) if self.a_k_major else (self.k, self.m)

    @property
    def b_shape(self) -> tuple[int, int]:
        return (self.n, self.k) if self.b_k_major else (self.k, self.n)

    def __str__(self) -> str:
        a = "regs" if self.a_in_registers else ("K" if self.a_k_major else "MN")
        b = "K" if self.b_k_major else "MN"
        return (
            f"m{self.m}n{self.n}k{self.k} {self.a_dtype}x{self.b_dtype} A{a} B{b}"
            f" sw{self.swizzle} acc={self.accumulate} calls={self.calls} {self.scale}"
        )


def draw_config(rnd: random.Random) -> Config:
    names = [(a, b) for a, b, _ in PAIRS]
    a_dtype, b_dtype = rnd.choices(names, [w for _, _, w in PAIRS])[0]
    sixteen = ITEMSIZE[a_dtype] == 2
    swizzle = rnd.choice((32, 64, 128))
    per_row = swizzle // ITEMSIZE[a_dtype]  # elements in one swizzled row
    a_k_major = not sixteen or rnd.random() < 0.6
    b_k_major = not sixteen or rnd.random() < 0.5
    in_registers = sixteen and a_k_major and rnd.random() < 0.25
    instruction_k = INSTRUCTION_K[a_dtype]
    k = max(instruction_k, per_row if (a_k_major or b_k_major) else 8) * rnd.randint(1, 2)
    n_unit = per_row if not b_k_major else (16 if a_dtype in ("int8", "uint8") else 8)
    m = 64 * rnd.randint(1, 2)
    widest = 256 if m == 64 else 224  # M·N/128 accumulator registers must leave room (hw.wgmma)
    n = n_unit * rnd.randint(1, widest // n_unit)
    return Config(
        m,
        n,
        k,
        a_dtype,
        b_dtype,
        a_k_major,
        b_k_major,
        swizzle,
        in_registers,
        accumulate=rnd.random() < 0.5,
        calls=rnd.choice((1, 1, 2)),
        scale=rnd.choice(("ints", "normal", "normal")),
    )
