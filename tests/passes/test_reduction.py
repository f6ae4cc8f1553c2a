"""TMA reductions: the op/dtype table, the IR, the PTX (assembled by ptxas), the interpreter
against an independent numpy reference for every allowed pair, and an error for every other."""

from __future__ import annotations

import re

import numpy as np
import pytest
from reduction_kernels import (
    COLS,
    PAIR_IDS,
    PAIRS,
    ROWS,
    exact_float_operands,
    random_operands,
    reduce_at_row,
    reduce_tiles,
    reference_fold,
    reference_step,
)
from support import line_of
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

import asyncdsl as ad
from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.hw import reduction
from asyncdsl.hw.reduction import ALLOWED, H200_WORKS, PTX_OP, REFERENCE_ALLOWS
from asyncdsl.interpret.reduction import combine
from asyncdsl.kernel_binary import TiledTensorMapSpec
from asyncdsl.passes.pipeline import ir_text, make_context

CTAS = 4
RNG = np.random.default_rng(5)

# The pairs asyncdsl allows beyond the reference's table (both run on the H200, §3.4).
EXTENSIONS = {("add", dtypes.float64)} | {
    (op, dtype) for op in ("min", "max")
    for dtype in (dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.uint64)
}
REFUSED = [(op, dtype) for op in reduction.OPS for dtype in dtypes.ALL if dtype not in ALLOWED[op]]


def spec_2d(dtype: ad.DType, rows: int = ROWS) -> ad.ArraySpec:
    return ad.ArraySpec((rows, COLS), dtype)


# -- the table --------------------------------------------------------------------------------


@pytest.mark.parametrize("op, dtype", PAIRS, ids=PAIR_IDS)
def test_every_allowed_pair_runs_on_the_h200_with_its_tensor_map_type(op, dtype):
    hardware_op, code = ALLOWED[op][dtype]
    assert PTX_OP[hardware_op] == PTX_OP[op]
    assert PTX_OP[op] in H200_WORKS[code]
    assert reduction.hardware_violation(hardware_op, code) is None


@pytest.mark.parametrize("op, dtype", PAIRS, ids=PAIR_IDS)
def test_every_allowed_pair_is_the_references_or_a_stated_extension(op, dtype):
    assert (dtype in REFERENCE_ALLOWS[op]) != ((op, dtype) in EXTENSIONS)


def test_the_references_pairs_are_all_allowed():
    for op, allowed in REFERENCE_ALLOWS.items():
        assert allowed <= set(ALLOWED[op]), op


def test_type_codes_follow_the_h200_table():
    codes = {(op, dtype.name): code for op, table in ALLOWED.items() for dtype, (_, code) in table.items()}
    assert codes["add", "int64"] == dtypes.TMA_UINT64  # INT64 adds fault
    assert codes["xor", "int64"] == dtypes.TMA_UINT64  # INT64 bitwise ops fault
    assert codes["smin", "uint32"] == dtypes.TMA_INT32 and codes["smax", "int64"] == dtypes.TMA_INT64
    assert codes["umax", "int32"] == dtypes.TMA_UINT32
    assert codes["inc", "int32"] == codes["dec", "uint32"] == dtypes.TMA_UINT32  # only UINT32 inc/decs
    assert codes["min", "int32"] == dtypes.TMA_INT32 and codes["max", "uint64"] == dtypes.TMA_UINT64


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("op, dtype", REFUSED, ids=[f"{op}-{dtype}" for op, dtype in REFUSED])
def test_every_other_pair_is_a_copy_error_at_the_users_line(op, dtype):
    kernel = reduce_at_row
    shape = (ROWS, COLS)
    with pytest.raises(ad.CopyError) as caught:
        kernel.compile(ad.ArraySpec(shape, dtype), ad.ArraySpec(shape, dtype), ROW=0, OP=op)
    message = str(caught.value)
    assert f"reduction {op!r} on {dtype} is not supported" in message
    assert "the reference system refuses it" in message or "faults on the H200" in message
    assert f"allowed for {dtype}: " in message or f"no reduction works on {dtype}" in message
    assert caught.value.location.line == line_of(kernel.fn, "reduction=OP")


@pytest.mark.parametrize(
    "op, dtype, fragments",
    [
        ("min", dtypes.float32, ["the reference system refuses it and it faults on the H200 (.min on a "
                                 "tensor map of type FLOAT32 died with CUDA_ERROR_ILLEGAL_INSTRUCTION",
                                 "allowed for float32: add"]),
        ("add", dtypes.int16, [".add on a tensor map of type UINT16", "no reduction works on int16"]),
        ("inc", dtypes.int64, [".inc on a tensor map of type UINT64", "allowed for int64: add, min, max"]),
        ("xor", dtypes.bfloat16,
         [".xor on a tensor map of type BFLOAT16", "allowed for bfloat16: add, min, max"]),
        ("max", dtypes.float64, [".max on a tensor map of type FLOAT64", "allowed for float64: add"]),
        ("add", dtypes.float8_e4m3fn,
         [".add on a tensor map of type UINT8", "no reduction works on float8_e4m3fn"]),
        ("add", dtypes.float4_e2m1fn, ["type UINT8", "no reduction works on float4_e2m1fn"]),
    ],
)
def test_refusals_say_why_and_what_works_instead(op, dtype, fragments):
    with pytest.raises(ad.CopyError) as caught:
        reduction.resolve(op, dtype)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_an_unknown_op_is_refused_by_the_copy_op():
    with pytest.raises(ad.TraceError, match=r"reduction must be one of .*got 'mul'") as caught:
        reduce_at_row.compile(spec_2d(ad.float32), spec_2d(ad.float32), ROW=0, OP="mul")
    assert caught.value.location.line == line_of(reduce_at_row.fn, "reduction=OP")


def test_loads_do_not_reduce():
    @ad.kernel
    def kernel(x):
        buf = ad.smem((ROWS, COLS), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[...], buf, barrier=bar, reduction="add")  # a load

    with pytest.raises(ad.TraceError, match="reductions apply to SMEM -> GMEM copies only") as caught:
        kernel.compile(spec_2d(ad.float32))
    assert caught.value.location.line == line_of(kernel.fn, "# a load")


def test_only_tma_copies_reduce():
    @ad.kernel
    def kernel(x):
        buf = ad.smem((ROWS, COLS), x.dtype)
        ad.async_copy(buf, x.at[...], reduction="add", implementation="cp_async")  # not tma

    with pytest.raises(ad.TraceError,
                       match="only TMA copies reduce: reduction='add' needs implementation='tma'"):
        kernel.compile(spec_2d(ad.float32))


def _store_with(reduction: str, code: int) -> ir.TmaStoreOp:
    smem = ir.AllocSmemOp((ROWS, COLS), dtypes.int64.mlir())
    spec = TiledTensorMapSpec(0, code, 8, (ROWS, COLS), (COLS * 8, 8), (ROWS, COLS))
    zero = [ir.ProgramIdOp(0).result, ir.ProgramIdOp(0).result]
    return ir.TmaStoreOp(smem.result, zero, TmaDescriptorAttr.from_spec(spec), reduction=reduction)


@pytest.mark.parametrize(
    "reduction, code, message",
    [
        ("add", dtypes.TMA_INT64, "reduction 'add' on a tensor map of type INT64 faults on the H200"),
        ("smin", dtypes.TMA_UINT64, "'smin' needs a signed integer tensor map (INT32/INT64), got UINT64"),
        ("umax", dtypes.TMA_INT64, "'umax' needs an unsigned integer tensor map (UINT32/UINT64), got INT64"),
    ],
)
def test_the_hardware_store_verifies_its_reduction_against_its_descriptor(reduction, code, message):
    with pytest.raises(VerifyException, match=re.escape(message)):
        _store_with(reduction, code).verify_()


def test_the_ir_cannot_hold_an_unknown_reduction():
    with pytest.raises(ValueError, match="'mul' is not a valid Reduction"):
        _store_with("mul", dtypes.TMA_UINT64)
    text = str(_store_with("smin", dtypes.TMA_INT64))
    assert "#asyncdsl<reduction smin>" in text
    with pytest.raises(ParseError, match="mul"):
        Parser(make_context(), text.replace("reduction smin", "reduction mul")).parse_op()


# -- IR and PTX -------------------------------------------------------------------------------


@pytest.mark.parametrize("op, dtype", PAIRS, ids=PAIR_IDS)
def test_the_store_carries_the_hardware_op_and_the_descriptor_its_type(op, dtype):
    hardware_op, code = ALLOWED[op][dtype]
    resolved = reduce_tiles.ir(spec_2d(dtype, CTAS * ROWS), spec_2d(dtype), OP=op, after="resolve-transforms")
    store = next(line for line in resolved.splitlines() if '"asyncdsl.tma_store"' in line)
    assert f'reduction = #asyncdsl<reduction {hardware_op}>' in store
    assert f"dtype = {code}," in store


@pytest.mark.parametrize("dtype", sorted({d for _, d in PAIRS}, key=str), ids=str)
def test_every_allowed_op_assembles(dtype, ptxas):
    for op in [op for op, d in PAIRS if d == dtype]:
        ptx = reduce_tiles.ptx(spec_2d(dtype, CTAS * ROWS), spec_2d(dtype), OP=op)
        instruction = f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{PTX_OP[op]}.tile.bulk_group"
        assert instruction in ptx, op
        ptxas(ptx)


def test_a_plain_store_and_a_signed_min_of_int32_need_two_descriptors():
    @ad.kernel(grid=(1,))
    def both(x, y):
        tile = ad.smem(x.shape, x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[...], tile, barrier=bar)
        bar.wait()
        ad.async_copy(tile, y.at[...])
        ad.async_copy(tile, y.at[...], reduction="smin")
        ad.async_copy(tile, y.at[...], reduction="umin")
        ad.await_async_copy(0)

    compiled = both.compile(spec_2d(ad.int32), spec_2d(ad.int32))
    codes = [d.dtype_code for d in compiled.binary.descriptors]
    # x; y for the plain store and the unsigned min (one descriptor); y for the signed min.
    assert codes == [dtypes.TMA_UINT32, dtypes.TMA_UINT32, dtypes.TMA_INT32]


# -- the interpreter against numpy ------------------------------------------------------------


@pytest.mark.parametrize("op, dtype", PAIRS, ids=PAIR_IDS)
def test_interpreter_matches_numpy_for_every_allowed_pair(op, dtype):
    x = random_operands(op, dtype, (CTAS * ROWS, COLS), RNG)
    y = random_operands(op, dtype, (ROWS, COLS), RNG)
    expected = reference_fold(op, dtype, y.copy(), x)
    reduce_tiles.interpret(x, y, OP=op)
    assert y.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", [ad.float16, ad.bfloat16, ad.float32, ad.float64], ids=str)
def test_float_adds_round_each_element_once(dtype):
    d = (RNG.standard_normal(4096) * 8).astype(dtype.numpy)
    s = (RNG.standard_normal(4096) * 8).astype(dtype.numpy)
    code = ALLOWED["add"][dtype][1]
    assert combine("add", code, d, s).tobytes() == reference_step("add", dtype, d, s).tobytes()


def test_inc_and_dec_follow_atom_inc_and_dec():
    d = np.array([0, 3, 5, 9, 0, 7, 2**32 - 1], np.uint32)
    s = np.array([4, 3, 5, 4, 0, 9, 2**32 - 1], np.uint32)
    inc = combine("inc", dtypes.TMA_UINT32, d, s)
    dec = combine("dec", dtypes.TMA_UINT32, d, s)
    assert inc.tolist() == [1, 0, 0, 0, 0, 8, 0]
    assert dec.tolist() == [4, 2, 4, 4, 0, 6, 2**32 - 2]


def test_integer_adds_wrap_around():
    x = np.full((CTAS * ROWS, COLS), 2**31 - 1, np.int32)
    y = np.ones((ROWS, COLS), np.int32)
    reduce_tiles.interpret(x, y, OP="add")
    assert (y == -3).all()  # 1 + 4 * (2^31 - 1) = 2^33 - 3, which wraps to -3


def test_exact_float_sums_do_not_depend_on_order():
    x = exact_float_operands(ad.bfloat16, (CTAS * ROWS, COLS), RNG)
    y = exact_float_operands(ad.bfloat16, (ROWS, COLS), RNG)
    exact = y.astype(np.float64) + x.astype(np.float64).reshape(CTAS, ROWS, COLS).sum(axis=0)
    reduce_tiles.interpret(x, y, OP="add")
    assert (y.astype(np.float64) == exact).all()


@pytest.mark.parametrize("op, dtype", [("add", ad.float32), ("smax", ad.int64), ("inc", ad.uint32)], ids=str)
def test_a_box_past_the_end_reduces_only_what_is_inside(op, dtype):
    x = random_operands(op, dtype, (ROWS, COLS), RNG)
    y = random_operands(op, dtype, (ROWS + 4, COLS), RNG)
    before = y.copy()
    reduce_at_row.interpret(x, y, ROW=ROWS, OP=op)
    assert y[:ROWS].tobytes() == before[:ROWS].tobytes()
    assert y[ROWS:].tobytes() == reference_step(op, dtype, before[ROWS:], x[:4]).tobytes()


def test_reductions_with_a_predicate_and_without_a_commit():
    @ad.kernel(grid=(CTAS,))
    def some_ctas(x, y):
        i = ad.program_id(0)
        tile = ad.smem((ROWS, COLS), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(i * ROWS, ROWS), :], tile, barrier=bar)
        bar.wait()
        ad.async_copy(tile, y.at[...], reduction="max", predicate=i % 2 == 1, arrive=False)
        ad.await_async_copy(0)

    x = random_operands("max", ad.int32, (CTAS * ROWS, COLS), RNG)
    y = random_operands("max", ad.int32, (ROWS, COLS), RNG)
    expected = y.copy()
    for cta in (1, 3):
        expected = np.maximum(expected, x[cta * ROWS : (cta + 1) * ROWS])
    some_ctas.interpret(x, y)
    assert (y == expected).all()


def test_reduction_ir_round_trips():
    stages = reduce_tiles.stages(spec_2d(ad.int32, CTAS * ROWS), spec_2d(ad.int32), OP="min")
    for stage in ("trace", "resolve-transforms", "allocate-descriptor-scratch"):
        parsed = Parser(make_context(), stages[stage]).parse_module()
        parsed.verify()  # the hardware store's verifier checks its op against its descriptor
        assert ir_text(parsed) == stages[stage]
