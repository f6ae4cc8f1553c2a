"""Element types: one table that ties together numpy, DLPack, the IR and the TMA type codes.

The TMA codes are the values of CUDA's `CUtensorMapDataType`.  Integers default to the unsigned
code of their width (the copy engine only moves bits, and 64-bit adds and bitwise reductions work
only on the unsigned codes on the H200); the signed codes are used by signed min/max reductions.
fp8 types travel as 8-bit integers, like the reference system does.

4-bit types (`float4_e2m1fn`, `int4`, `uint4`) are packed two per byte in GMEM and SMEM: element
2k in the low nibble of byte k of the row-major order (the order of CUDA's packed
`__nv_fp4x2_e2m1`: first element in the low bits).  Hopper's TMA has no 4-bit type, so their copies travel
as bytes
(`asyncdsl.hw.packed`); numpy holds them unpacked, one per byte (ml_dtypes), and
`hw.packed.pack`/`unpack` convert at the host boundary.  2-bit integers have no Hopper
copy path at all and are refused by name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from asyncdsl.errors import ArgumentError

if TYPE_CHECKING:
    from xdsl.ir import Attribute

# CUtensorMapDataType values (cuda.h, CUDA 13.0).
TMA_UINT8, TMA_UINT16, TMA_UINT32, TMA_INT32 = 0, 1, 2, 3
TMA_UINT64, TMA_INT64, TMA_FLOAT16, TMA_FLOAT32 = 4, 5, 6, 7
TMA_FLOAT64, TMA_BFLOAT16 = 8, 9

# DLPack type codes.
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_BOOL = 0, 1, 2, 4, 6
_DL_FLOAT8_E4M3FN, _DL_FLOAT8_E5M2, _DL_FLOAT8_E8M0FNU = 10, 12, 14


@dataclass(frozen=True)
class DType:
    """An element type a kernel can move.  `bits` may be 4 for packed fp4.

    `numpy` is the numpy dtype (numpy's own, or ml_dtypes' for bfloat16, fp8 and 4-bit types),
    made on first use: importing ml_dtypes takes longer than the rest of `import asyncdsl`, and
    a GPU launch never needs it."""

    name: str
    bits: int
    kind: str  # "int", "uint", "float"
    numpy_name: str  # numpy's name of the type, or ml_dtypes' where numpy has none
    tma_code: int
    signed_tma_code: int | None = None

    def __getattr__(self, attribute: str) -> Any:
        # Called only while `numpy` is not yet an instance attribute: make it one.
        if attribute != "numpy":
            raise AttributeError(attribute)
        if hasattr(np, self.numpy_name):
            value = np.dtype(self.numpy_name)
        else:
            import ml_dtypes

            value = np.dtype(getattr(ml_dtypes, self.numpy_name))
        object.__setattr__(self, "numpy", value)
        return value

    @property
    def itemsize(self) -> int:
        """Bytes per element (a packed 4-bit type reports 1: two share a byte)."""
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    def mlir(self) -> Attribute:
        return _mlir_types()[self.name]

    def __hash__(self) -> int:
        # The name alone identifies a DType; the generated hash of every field costs more than
        # the rest of a warm kernel call's layout key.
        return hash(self.name)

    def __repr__(self) -> str:
        return f"asyncdsl.{self.name}"

    def __str__(self) -> str:
        return self.name


int8 = DType("int8", 8, "int", "int8", TMA_UINT8)
int16 = DType("int16", 16, "int", "int16", TMA_UINT16)
int32 = DType("int32", 32, "int", "int32", TMA_UINT32, TMA_INT32)
int64 = DType("int64", 64, "int", "int64", TMA_UINT64, TMA_INT64)
uint8 = DType("uint8", 8, "uint", "uint8", TMA_UINT8)
uint16 = DType("uint16", 16, "uint", "uint16", TMA_UINT16)
uint32 = DType("uint32", 32, "uint", "uint32", TMA_UINT32)
uint64 = DType("uint64", 64, "uint", "uint64", TMA_UINT64)
float16 = DType("float16", 16, "float", "float16", TMA_FLOAT16)
bfloat16 = DType("bfloat16", 16, "float", "bfloat16", TMA_BFLOAT16)
float32 = DType("float32", 32, "float", "float32", TMA_FLOAT32)
float64 = DType("float64", 64, "float", "float64", TMA_FLOAT64)
float8_e4m3fn = DType("float8_e4m3fn", 8, "float", "float8_e4m3fn", TMA_UINT8)
float8_e5m2 = DType("float8_e5m2", 8, "float", "float8_e5m2", TMA_UINT8)
float8_e8m0fnu = DType("float8_e8m0fnu", 8, "float", "float8_e8m0fnu", TMA_UINT8)
float4_e2m1fn = DType("float4_e2m1fn", 4, "float", "float4_e2m1fn", TMA_UINT8)
int4 = DType("int4", 4, "int", "int4", TMA_UINT8)
uint4 = DType("uint4", 4, "uint", "uint4", TMA_UINT8)

# The element type of comparison results (masks): register tiles only, never copied or passed.
BOOL = DType("bool", 1, "bool", "bool_", TMA_UINT8)

ALL: tuple[DType, ...] = (
    int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2, float8_e8m0fnu,
    float4_e2m1fn, int4, uint4,
)
_BY_NAME = {d.name: d for d in ALL}
_ALIASES = {
    "i8": int8, "i16": int16, "i32": int32, "i64": int64,
    "u8": uint8, "u16": uint16, "u32": uint32, "u64": uint64,
    "f16": float16, "half": float16, "bf16": bfloat16, "f32": float32, "float": float32,
    "f64": float64, "double": float64, "e4m3": float8_e4m3fn, "e5m2": float8_e5m2,
    "float8_e4m3": float8_e4m3fn, "e8m0": float8_e8m0fnu, "fp4": float4_e2m1fn,
    "i4": int4, "u4": uint4,
}
# Element types that exist in numpy (ml_dtypes) but that no Hopper copy can move.
_REFUSED = {
    "int2": "2-bit integers (int2/uint2) cannot be moved: Hopper's TMA has no 2-bit element "
    "type, and asyncdsl packs only 4-bit types into bytes",
}
_REFUSED["uint2"] = _REFUSED["int2"]

@functools.cache
def _mlir_types() -> dict[str, Attribute]:
    """Each DType's IR element type, made when IR is first built: xDSL is not imported by
    `import asyncdsl` (a process launching kernels compiled earlier never builds IR)."""
    from xdsl.dialects import builtin

    return {
        "int8": builtin.IntegerType(8),
        "int16": builtin.IntegerType(16),
        "int32": builtin.IntegerType(32),
        "int64": builtin.IntegerType(64),
        "uint8": builtin.IntegerType(8, builtin.Signedness.UNSIGNED),
        "uint16": builtin.IntegerType(16, builtin.Signedness.UNSIGNED),
        "uint32": builtin.IntegerType(32, builtin.Signedness.UNSIGNED),
        "uint64": builtin.IntegerType(64, builtin.Signedness.UNSIGNED),
        "float16": builtin.Float16Type(),
        "bfloat16": builtin.BFloat16Type(),
        "float32": builtin.Float32Type(),
        "float64": builtin.Float64Type(),
        "float8_e4m3fn": builtin.Float8E4M3FNType(),
        "float8_e5m2": builtin.Float8E5M2Type(),
        "float8_e8m0fnu": builtin.Float8E8M0FNUType(),
        "float4_e2m1fn": builtin.Float4E2M1FNType(),
        "int4": builtin.IntegerType(4),
        "uint4": builtin.IntegerType(4, builtin.Signedness.UNSIGNED),
        "bool": builtin.IntegerType(1),
    }


@functools.cache
def _by_mlir() -> dict[Attribute, DType]:
    return {v: _BY_NAME.get(k, BOOL) for k, v in _mlir_types().items()}


def from_mlir(attr: Attribute) -> DType:
    """The DType of an IR element type."""
    try:
        return _by_mlir()[attr]
    except KeyError:
        raise ArgumentError(f"element type {attr} is not one asyncdsl can move") from None


def from_dlpack(code: int, bits: int) -> DType:
    """The DType of a DLPack (type code, bits) pair."""
    table = {
        (_DL_INT, 8): int8, (_DL_INT, 16): int16, (_DL_INT, 32): int32, (_DL_INT, 64): int64,
        (_DL_UINT, 8): uint8, (_DL_UINT, 16): uint16, (_DL_UINT, 32): uint32,
        (_DL_UINT, 64): uint64, (_DL_FLOAT, 16): float16, (_DL_FLOAT, 32): float32,
        (_DL_FLOAT, 64): float64, (_DL_BFLOAT, 16): bfloat16, (_DL_BOOL, 8): uint8,
        (_DL_FLOAT8_E4M3FN, 8): float8_e4m3fn, (_DL_FLOAT8_E5M2, 8): float8_e5m2,
        (_DL_FLOAT8_E8M0FNU, 8): float8_e8m0fnu,
    }
    try:
        return table[(code, bits)]
    except KeyError:
        raise ArgumentError(f"DLPack dtype (code {code}, {bits} bits) is not supported") from None


def as_dtype(value: Any) -> DType:
    """Accept a DType, a name ("bf16"), a numpy dtype or scalar type, or a torch/JAX/CuPy dtype."""
    if isinstance(value, DType):
        return value
    if value is None:  # numpy would read it as float64
        raise ArgumentError("no element type given (None)")
    if isinstance(value, str):
        found = _BY_NAME.get(value) or _ALIASES.get(value)
        if value in _REFUSED:
            raise ArgumentError(_REFUSED[value])
        if found is None:
            raise ArgumentError(f"unknown dtype {value!r}; known: {', '.join(_BY_NAME)}")
        return found
    try:
        np_dtype = np.dtype(value)
    except TypeError:
        # torch.bfloat16 and friends: their str() is "torch.bfloat16".
        text = str(value).rsplit(".", 1)[-1]
        if text == "bool":  # torch.bool: booleans travel as bytes, as numpy's do (below)
            return uint8
        if text in _BY_NAME or text in _ALIASES:
            return as_dtype(text)
        raise ArgumentError(f"cannot interpret {value!r} as an element type") from None
    if np_dtype == np.bool_:
        return uint8
    # A dtype's name is the DType's (ml_dtypes names its types as we do); the dtype itself must
    # match too: numpy names an unrelated type "bool", "float128", ...
    found = _BY_NAME.get(np_dtype.name)
    if found is None or found.numpy != np_dtype:
        if np_dtype.name in _REFUSED:
            raise ArgumentError(_REFUSED[np_dtype.name])
        raise ArgumentError(f"numpy dtype {np_dtype} is not supported")
    return found
