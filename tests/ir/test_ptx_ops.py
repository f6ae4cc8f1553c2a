"""Every instruction of every example kernel is lowered as the op class its PTX mnemonic says it
is, so that passes reading op classes and their declared effects (`ptx_effects`) see what the
printed instruction does; and the instructions built from their fields print what PTX spells."""

from __future__ import annotations

import re

import pytest
from xdsl.ir import Block

from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects import ptx
from asyncdsl.passes.lower_to_ptx import lower_kernel
from asyncdsl.passes.to_ptx.builder import PtxBuilder
from library_kernels import example_kernels

# The mnemonics (the text before the first `.` or space) of instructions that only read and
# write registers, per the PTX ISA's integer, floating-point, comparison, logic, data-movement
# (`mov`, `shfl`, `prmt`, `cvt`, `cvta`) instruction chapters.
REGISTER_ONLY = {
    "abs", "add", "and", "bfe", "bfi", "bfind", "brev", "clz", "cnot", "copysign", "cos", "cvt", "cvta",
    "div", "ex2", "fma", "lg2", "mad", "max", "min", "mov", "mul", "neg", "not", "or", "popc", "prmt", "rcp",
    "rem", "rsqrt", "selp", "set", "setp", "shf", "shfl", "shl", "shr", "sin", "sqrt", "sub", "tanh", "testp",
    "xor",
}

# Instruction text prefixes -> op, most specific first.
BY_PREFIX = (
    ("cp.async.bulk.prefetch", "ptx.bulk_prefetch"),
    ("cp.async.bulk.commit_group", "ptx.bulk_commit"),
    ("cp.async.bulk.wait_group", "ptx.bulk_wait"),
    ("cp.async.commit_group", "ptx.cp_async_commit"),
    ("cp.async.wait_group", "ptx.cp_async_wait"),
    ("cp.async.wait_all", "ptx.cp_async_wait_all"),
    ("cp.async.mbarrier.arrive", "ptx.mbarrier_arrive"),
    ("wgmma.fence", "ptx.wgmma_fence"),
    ("wgmma.mma_async", "ptx.wgmma_mma"),
    ("wgmma.commit_group", "ptx.wgmma_commit"),
    ("wgmma.wait_group", "ptx.wgmma_wait"),
    ("mbarrier.init", "ptx.mbarrier_init"),
    ("mbarrier.arrive", "ptx.mbarrier_arrive"),
    ("mbarrier.complete_tx", "ptx.mbarrier_arrive"),
    ("mbarrier.try_wait", "ptx.mbarrier_try_wait"),
    ("fence.proxy.async", "ptx.fence_proxy_async"),
    ("fence.mbarrier_init", "ptx.fence_mbarrier_init"),
    ("barrier.cluster", "ptx.barrier_cluster"),
    ("bar.", "ptx.bar"),
    ("bra ", "ptx.bra"),
    ("ld.param", "ptx.alu"),
)
# A bulk copy's direction: the state space it writes comes first.
_BULK = re.compile(r"cp(?:\.reduce)?\.async\.bulk(?:\.tensor\.\dd)?\.(shared|global)")
_MEMORY = ("ld", "st", "atom", "red", "prefetch", "ldmatrix", "stmatrix")


def expected_op(text: str) -> str:
    for prefix, name in BY_PREFIX:
        if text.startswith(prefix):
            return name
    bulk = _BULK.match(text)
    if bulk:
        return "ptx.bulk_load" if bulk.group(1) == "shared" else "ptx.bulk_store"
    if text.startswith("cp.async."):
        return "ptx.cp_async"
    mnemonic = re.split(r"[. ]", text, maxsplit=1)[0]
    if mnemonic in REGISTER_ONLY:
        return "ptx.alu"
    if mnemonic in _MEMORY:
        return "ptx.mem"
    return "ptx.instr"  # mapa, createpolicy, setmaxnreg: effects no pass needs


@pytest.mark.parametrize("kernel,args,kwargs", list(example_kernels()))
def test_every_instruction_is_lowered_as_the_op_its_mnemonic_names(kernel, args, kwargs):
    # The compiled kernel's IR lowered again (lowering leaves it as it was): the ops themselves,
    # unprinted, from the compile the example's other tests in this process make.
    compiled = kernel.compile(*args, **kwargs)
    (fn,) = attrs.kernels(compiled.module)
    found = [(op.name, op.properties["text"].data) for op in lower_kernel(fn, compiled.binary.params).walk()
             if "text" in op.properties]
    assert found
    wrong = sorted({f"{op}: {text}" for op, text in found if op != expected_op(text)})
    assert not wrong, wrong


def test_fielded_instructions_print_as_ptx_spells_them():
    block = Block()
    b = PtxBuilder(block)
    barrier = b.mov("b32", 1)
    b.bar("sync", 0)
    b.bar("sync", barrier, 128)
    b.bar("arrive", 3, 256)
    for op in (ptx.ClusterBarrierOp("arrive"), ptx.ClusterBarrierOp("wait"), ptx.ProxyFenceOp("global"),
               ptx.MbarrierInitFenceOp(), ptx.WgmmaFenceOp(), ptx.WgmmaCommitOp(), ptx.WgmmaWaitOp(1),
               ptx.CpAsyncCommitOp(), ptx.CpAsyncWaitOp(2), ptx.CpAsyncWaitAllOp(), ptx.BulkCommitOp(),
               ptx.BulkWaitOp(0, read=True), ptx.BulkWaitOp(3)):
        b.append(op)
    b.branch("L1")
    texts = [op.text.data for op in list(block.ops)[1:]]
    assert texts == [
        "bar.sync 0;", "bar.sync #{0}, 128;", "bar.arrive 3, 256;",
        "barrier.cluster.arrive.release.aligned;", "barrier.cluster.wait.acquire.aligned;",
        "fence.proxy.async.global;", "fence.mbarrier_init.release.cluster;", "wgmma.fence.sync.aligned;",
        "wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 1;", "cp.async.commit_group;",
        "cp.async.wait_group 2;", "cp.async.wait_all;", "cp.async.bulk.commit_group;",
        "cp.async.bulk.wait_group.read 0;", "cp.async.bulk.wait_group 3;", "bra $L1;",
    ]
    for op in block.ops:
        op.verify()
    assert all(expected_op(text) == op.name for text, op in zip(texts, list(block.ops)[1:]))


def test_a_barrier_whose_text_disagrees_with_its_fields_does_not_verify():
    from xdsl.utils.exceptions import VerifyException

    op = ptx.BarrierOp("sync", 0)
    op.properties["text"] = ptx.BarrierOp("sync", 1).text
    with pytest.raises(VerifyException, match="fields spell"):
        op.verify()
