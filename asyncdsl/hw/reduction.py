"""TMA reductions (`cp.reduce.async.bulk.tensor`): which (op, dtype) pairs are allowed, the
tensor-map type each is encoded with, and their arithmetic on numpy arrays.

A reduction is an SMEM -> GMEM copy that combines each element of the box with the element
already in GMEM.  PTX names only the op (`.add`, `.min`, ...); the element type, signedness
included, comes from the tensor map.  So the choice of tensor-map type is part of the op:
signed min/max use the signed integer types, everything else on integers the unsigned ones.

Three tables, side by side, so that every refusal can say why:

- `ALLOWED`: what asyncdsl accepts, and as what (hardware op name, tensor-map type).
- `REFERENCE_ALLOWS`: the reference system's table (Mosaic GPU's
  `_is_tma_reduction_op_supported`) restated for asyncdsl's dtypes.  Its integers are signless,
  so its i32 covers int32 and uint32.
- `H200_WORKS`: what an H200 did with each tensor-map type and PTX op (docs/hardware.md §6.2);
  every pair not listed died with CUDA_ERROR_ILLEGAL_INSTRUCTION although ptxas accepts them all.

`ALLOWED` is the reference's table with two departures, both where the H200 works:
`add` on float64 (the reference has no f64 reductions; the H200 adds FLOAT64 maps), and
`min`/`max` on integer dtypes, which mean the min/max of the dtype's own values (signed for
int32/int64, unsigned for uint32/uint64): the reference's signless integers make its users
spell `smin`/`umin`, asyncdsl's dtypes carry the signedness.  Where the reference and the
hardware disagree the other way no pair remains: every reference pair works once encoded with
the type `ALLOWED` names (64-bit add and bitwise ops fault on INT64 maps, so they use UINT64;
inc/dec work only on UINT32).
The arithmetic of each op on numpy arrays is the interpreter's (`asyncdsl.interpret.reduction`).
"""

from __future__ import annotations

from asyncdsl.dtypes import (
    TMA_BFLOAT16,
    TMA_FLOAT16,
    TMA_FLOAT32,
    TMA_FLOAT64,
    TMA_INT32,
    TMA_INT64,
    TMA_UINT8,
    TMA_UINT16,
    TMA_UINT32,
    TMA_UINT64,
    DType,
    bfloat16,
    float16,
    float32,
    float64,
    int32,
    int64,
    uint32,
    uint64,
)
from asyncdsl.errors import CopyError
from asyncdsl.hw.options import Reduction

OPS = tuple(Reduction)

# The PTX op of each reduction: signedness lives in the tensor map, not in the instruction.
PTX_OP: dict[str, str] = {
    op: {"umin": "min", "smin": "min", "umax": "max", "smax": "max"}.get(op, op) for op in OPS
}

TYPE_NAMES = {
    TMA_UINT8: "UINT8", TMA_UINT16: "UINT16", TMA_UINT32: "UINT32", TMA_INT32: "INT32",
    TMA_UINT64: "UINT64", TMA_INT64: "INT64", TMA_FLOAT16: "FLOAT16", TMA_FLOAT32: "FLOAT32",
    TMA_FLOAT64: "FLOAT64", TMA_BFLOAT16: "BFLOAT16",
}
_SIGNED_TYPES = {TMA_INT32, TMA_INT64}
_UNSIGNED_TYPES = {TMA_UINT32, TMA_UINT64}

# docs/hardware.md §6.2: per tensor-map type, the PTX ops that worked on the H200.
H200_WORKS: dict[int, frozenset[str]] = {
    TMA_FLOAT32: frozenset({"add"}),
    TMA_FLOAT16: frozenset({"add", "min", "max"}),
    TMA_BFLOAT16: frozenset({"add", "min", "max"}),
    TMA_FLOAT64: frozenset({"add"}),
    TMA_INT32: frozenset({"add", "min", "max", "and", "or", "xor"}),
    TMA_UINT32: frozenset({"add", "min", "max", "inc", "dec", "and", "or", "xor"}),
    TMA_INT64: frozenset({"min", "max"}),
    TMA_UINT64: frozenset({"add", "min", "max", "and", "or", "xor"}),
    TMA_UINT16: frozenset(),
    TMA_UINT8: frozenset(),
}

_INTS = frozenset({int32, uint32, int64, uint64})
_HALF_FLOATS = frozenset({float16, bfloat16})

# Mosaic GPU's `_is_tma_reduction_op_supported`, in asyncdsl dtypes.
REFERENCE_ALLOWS: dict[str, frozenset[DType]] = {
    "add": _HALF_FLOATS | {float32} | _INTS,
    "min": _HALF_FLOATS,
    "max": _HALF_FLOATS,
    **{op: _INTS for op in ("umin", "umax", "smin", "smax", "and", "or", "xor")},
    "inc": frozenset({int32, uint32}),
    "dec": frozenset({int32, uint32}),
}


def _on_ints(op: str, width32: int, width64: int) -> dict[DType, tuple[str, int]]:
    return {int32: (op, width32), uint32: (op, width32), int64: (op, width64), uint64: (op, width64)}


# What asyncdsl accepts: user op -> dtype -> (hardware op, tensor-map type).
ALLOWED: dict[str, dict[DType, tuple[str, int]]] = {
    "add": {
        float16: ("add", TMA_FLOAT16),
        bfloat16: ("add", TMA_BFLOAT16),
        float32: ("add", TMA_FLOAT32),
        float64: ("add", TMA_FLOAT64),  # beyond the reference: the H200 adds FLOAT64 maps
        **_on_ints("add", TMA_UINT32, TMA_UINT64),  # INT64 adds fault; two's complement agrees
    },
    # min/max on integers follow the dtype's signedness (beyond the reference, see above).
    "min": {
        float16: ("min", TMA_FLOAT16),
        bfloat16: ("min", TMA_BFLOAT16),
        int32: ("smin", TMA_INT32),
        int64: ("smin", TMA_INT64),
        uint32: ("umin", TMA_UINT32),
        uint64: ("umin", TMA_UINT64),
    },
    "max": {
        float16: ("max", TMA_FLOAT16),
        bfloat16: ("max", TMA_BFLOAT16),
        int32: ("smax", TMA_INT32),
        int64: ("smax", TMA_INT64),
        uint32: ("umax", TMA_UINT32),
        uint64: ("umax", TMA_UINT64),
    },
    "umin": _on_ints("umin", TMA_UINT32, TMA_UINT64),
    "umax": _on_ints("umax", TMA_UINT32, TMA_UINT64),
    "smin": _on_ints("smin", TMA_INT32, TMA_INT64),
    "smax": _on_ints("smax", TMA_INT32, TMA_INT64),
    "inc": {int32: ("inc", TMA_UINT32), uint32: ("inc", TMA_UINT32)},
    "dec": {int32: ("dec", TMA_UINT32), uint32: ("dec", TMA_UINT32)},
    "and": _on_ints("and", TMA_UINT32, TMA_UINT64),  # INT64 bitwise ops fault
    "or": _on_ints("or", TMA_UINT32, TMA_UINT64),
    "xor": _on_ints("xor", TMA_UINT32, TMA_UINT64),
}


def resolve(op: str, dtype: DType) -> tuple[str, int]:
    """(hardware op, tensor-map type) of reduction `op` on `dtype` elements.

    Raises CopyError naming why the pair is refused and what the dtype allows instead.
    """
    if op not in ALLOWED:
        raise CopyError(f"reduction must be one of {tuple(map(str, OPS))}, got {op!r}")
    found = ALLOWED[op].get(dtype)
    if found is not None:
        return found
    reasons = []
    if dtype not in REFERENCE_ALLOWS[op]:
        reasons.append("the reference system refuses it")
    code = _natural_type(op, dtype)
    if PTX_OP[op] not in H200_WORKS.get(code, frozenset()):
        reasons.append(
            f"it faults on the H200 (.{PTX_OP[op]} on a tensor map of type "
            f"{TYPE_NAMES.get(code, code)} died with CUDA_ERROR_ILLEGAL_INSTRUCTION, "
            "docs/hardware.md §6.2)"
        )
    others = [name for name, table in ALLOWED.items() if dtype in table]
    instead = f"allowed for {dtype}: {', '.join(others)}" if others else f"no reduction works on {dtype}"
    raise CopyError(f"reduction {op!r} on {dtype} is not supported: {' and '.join(reasons)}; {instead}")


def _natural_type(op: str, dtype: DType) -> int:
    """The tensor-map type the pair would have: the dtype's own, signed for smin/smax."""
    if op in ("smin", "smax") and dtype.signed_tma_code is not None:
        return dtype.signed_tma_code
    return dtype.tma_code


def hardware_violation(op: str, type_code: int) -> str | None:
    """Why a `tma_store` reducing with `op` through a map of `type_code` is wrong, or None."""
    if op not in OPS:
        return f"reduction must be one of {tuple(map(str, OPS))}, got {op!r}"
    ptx_op = PTX_OP[op]
    if ptx_op not in H200_WORKS.get(type_code, frozenset()):
        return (
            f"reduction {op!r} on a tensor map of type {TYPE_NAMES.get(type_code, type_code)} "
            "faults on the H200 (docs/hardware.md §6.2)"
        )
    # The map's type is what decides signedness: a name saying otherwise would lie.
    if op in ("smin", "smax") and type_code not in _SIGNED_TYPES:
        return (f"reduction {op!r} needs a signed integer tensor map (INT32/INT64), got "
                f"{TYPE_NAMES[type_code]}")
    if op in ("umin", "umax") and type_code not in _UNSIGNED_TYPES:
        return (f"reduction {op!r} needs an unsigned integer tensor map (UINT32/UINT64), got "
                f"{TYPE_NAMES[type_code]}")
    return None
