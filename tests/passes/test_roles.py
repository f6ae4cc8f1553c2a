"""Warpgroup roles and cluster-wide arrivals in PTX: the branch on the warpgroup index, the
`setmaxnreg` that opens each role, the `.maxnreg` that lets ptxas honour it, the remote arrives
through `mapa`; every kernel assembled by ptxas for sm_90a, the roles kernel without advisories."""

from __future__ import annotations

import re

import pytest
from roles_kernels import multicast_ring, persistent_copy, producer_consumer, turn_order

import asyncdsl as ad
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.runtime.ptxas import assemble

X = ad.ArraySpec((512, 64), ad.float32)


def ptxas_log(ptx: str) -> str:
    return assemble(ptx, verbose=True)[1]


def test_roles_40_232_232_assemble_without_advisories():
    ptx = producer_consumer.ptx(X, X)
    assert ".reqntid 384, 1, 1\n.maxnreg 168\n" in ptx
    assert ptx.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
    assert ptx.count("setmaxnreg.inc.sync.aligned.u32 232;") == 1
    log = ptxas_log(ptx)
    assert "warning" not in log.lower() and not re.search(r"C75\d\d", log), log
    assert "Used 168 registers" in log, log


def test_each_role_is_a_branch_on_the_warpgroup_index_opened_by_setmaxnreg():
    ptx = producer_consumer.ptx(X, X)
    warpgroup = re.search(r"shr\.u32 (%r\d+), %r\d+, 7;", ptx).group(1)
    producer = re.search(
        rf"setp\.ge\.u32 (%p\d+), {warpgroup}, 2;\n\s+@!\1 bra \$(\w+);\n"
        r"\s+setmaxnreg\.dec\.sync\.aligned\.u32 40;", ptx
    )
    consumers = re.search(
        rf"setp\.le\.u32 (%p\d+), {warpgroup}, 1;\n\s+@!\1 bra \$(\w+);\n"
        r"\s+setmaxnreg\.inc\.sync\.aligned\.u32 232;", ptx
    )
    assert producer and consumers, ptx
    # The producer's role ends before the consumers' begins: code after a role runs everywhere.
    assert ptx.index(f"${producer.group(2)}:") < consumers.start()


def kernel_of(first, second, block=384):
    @ad.kernel(block=block)
    def kernel(x):
        with ad.warpgroup_role(first[0], registers=first[1]):
            ad.warpgroup_barrier()
        with ad.warpgroup_role(second[0], registers=second[1]):
            ad.warpgroup_barrier()

    return kernel


def test_roles_without_registers_are_branches_only():
    ptx = kernel_of(((0, 2), None), (1, None)).ptx(X)
    assert "setmaxnreg" not in ptx and ".maxnreg" not in ptx
    assert re.search(
        r"setp\.eq\.u32 (%p\d+), %r\d+, 0;\n\s+setp\.eq\.u32 (%p\d+), %r\d+, 2;\n\s+or\.pred", ptx), ptx
    assemble(ptx)


def test_a_role_at_the_cap_needs_no_setmaxnreg():
    ptx = kernel_of((0, 168), ((1, 2), 168)).ptx(X)
    assert ".maxnreg 168" in ptx and "setmaxnreg" not in ptx
    assemble(ptx)


def test_24_240_240_also_assembles_cleanly():
    ptx = kernel_of((0, 24), ((1, 2), 240)).ptx(X)
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ptx and "setmaxnreg.inc.sync.aligned.u32 240;" in ptx
    log = ptxas_log(ptx)
    assert not re.search(r"C75\d\d", log), log


def test_role_op_holds_its_warpgroups_and_registers():
    module = producer_consumer.compile(X, X).module
    roles = [op for op in module.walk() if isinstance(op, ir.WarpgroupRoleOp)]
    assert [(r.warpgroup_indices, r.register_count) for r in roles] == [((2,), 40), ((0, 1), 232)]


def test_collective_arrive_maps_the_barrier_into_every_cta_of_the_group():
    ptx = multicast_ring.ptx(X, ad.ArraySpec((1024, 64), ad.float32))
    arrivals = re.findall(
        r"mapa\.shared::cluster\.u32 (%r\d+), (%r\d+), (\d);\n\s+@(%p\d+) "
        r"mbarrier\.arrive\.release\.cta\.shared::cluster\.b64 _, \[\1\], 1;",
        ptx,
    )
    # The initial release and the one per step, each to ranks 0 and 1 of the 2-CTA cluster.
    assert [rank for _, _, rank, _ in arrivals] == ["0", "1", "0", "1"], ptx
    assert len({barrier for _, barrier, _, _ in arrivals}) == 1  # the same `empty` barrier
    assert not re.search(r"mbarrier\.arrive\.release\.\w+\.shared::cta", ptx)  # no local arrive is left
    assemble(ptx)


def test_collective_arrive_along_x_of_a_2x2_cluster_targets_this_row():
    @ad.kernel(grid=(2, 2), cluster=(2, 2, 1))
    def kernel(x):
        bar = ad.barrier(arrival_count=2)
        bar.arrive(collective="x")
        bar.wait()

    ptx = kernel.ptx(X)
    # Group = the CTAs sharing this CTA's y: ranks 2*y and 2*y + 1.
    assert re.search(
        r"mov\.u32 (%r\d+), %cluster_ctaid\.y;\n\s+mul\.lo\.s32 (%r\d+), \1, 2;\n\s+"
        r"mapa\.shared::cluster\.u32 (%r\d+), (%r\d+), \2;\n\s+@%p\d+ mbarrier\.arrive\.release\.cta"
        r"\.shared::cluster\.b64 _, \[\3\], 1;\n\s+add\.s32 (%r\d+), \2, 1;\n\s+"
        r"mapa\.shared::cluster\.u32 (%r\d+), \4, \5;",
        ptx,
    ), ptx
    assemble(ptx)


def test_collective_arrive_keeps_its_count():
    @ad.kernel(grid=(4,), cluster=(4, 1, 1))
    def kernel(x):
        bar = ad.barrier(arrival_count=8)
        bar.arrive(2, collective="x")
        bar.wait()

    ptx = kernel.ptx(X)
    assert ptx.count("mbarrier.arrive.release.cta.shared::cluster.b64 _, [") == 4
    assert ptx.count("], 2;") >= 4
    assemble(ptx)


@pytest.mark.parametrize("sync,reach_peer,scope", [(True, True, "cluster"), (False, True, "cta"),
                                                    (True, False, "cta"), (False, False, "cta")])
def test_a_collective_arrive_releases_at_cluster_scope_only_when_it_publishes_writes(sync, reach_peer, scope):
    """Cluster scope only for a synced arrival in a kernel whose threads reach other CTAs' shared
    memory (here: a store into the peer's buffer); elsewhere a peer sees this CTA's shared memory
    only through copies into it, and the arrival has nothing of the threads' to publish."""
    @ad.kernel(grid=(2,), cluster=(2, 1, 1))
    def kernel(x):
        buf = ad.smem((64, 64), ad.float32)
        bar = ad.barrier(arrival_count=2)
        if reach_peer:
            buf.peer(1 - ad.cluster_cta_id(0))[...] = ad.zeros((64, 64), ad.float32)
        bar.arrive(collective="x", sync=sync)
        bar.wait()

    ptx = kernel.ptx(X)
    assert ptx.count(f"mbarrier.arrive.release.{scope}.shared::cluster.b64 _, [") == 2
    assert ("st.shared::cluster" in ptx) == reach_peer
    if not reach_peer:  # (the store into the peer meets the warpgroup itself)
        assert ("bar.sync" in ptx) == sync
    assemble(ptx)


def test_collective_arrive_becomes_cluster_arrive_after_partition_collectives():
    text = multicast_ring.ir(X, ad.ArraySpec((1024, 64), ad.float32), after="partition-collectives")
    assert '"asyncdsl.cluster_arrive"' in text and 'collective = ["x"]' in text
    assert "collective [" not in text  # no asyncdsl.arrive still carries one


def test_persistent_kernel_assembles():
    seen = ad.ArraySpec((1024, 128), ad.int32)
    assemble(
        persistent_copy.ptx(ad.ArraySpec((10, 32), ad.float32), ad.ArraySpec((10, 32), ad.float32), seen))


@pytest.mark.parametrize("count", [1, 3])
def test_plain_arrive_is_unchanged(count):
    @ad.kernel()
    def kernel(x):
        bar = ad.barrier(arrival_count=count)
        bar.arrive(count)
        bar.wait()

    ptx = kernel.ptx(X)
    assert re.search(
        rf"mbarrier\.arrive\.release\.cta\.shared::cta\.b64 %rd\d+, \[%r\d+\], {count};", ptx), ptx
    assert "mapa" not in ptx and ptx.count("mbarrier.arrive.release") == 1


def test_turns_are_named_barriers_after_the_warpgroups_own():
    ptx = turn_order.ptx(ad.ArraySpec((8, 64), ad.float32), ad.ArraySpec((8, 64), ad.float32))
    # 2 warpgroups: bar.sync 0, ids 1 and 2 are theirs, the turns take 3 and 4.  Warpgroup 1
    # hands warpgroup 0 its first turn; then each waits on its own and arrives on the other's.
    prime = re.search(r"setp\.eq\.u32 (%p\d+), %r\d+, 1;\n\s+@\1 bar\.arrive 3, 256;", ptx)
    assert prime, ptx
    assert re.search(r"add\.u32 (%r\d+), %r\d+, 3;\n\s+bar\.sync \1, 256;", ptx), ptx
    assert re.search(r"selp\.u32 %r\d+, 0, %r\d+, %p\d+;\n\s+add\.u32 (%r\d+), %r\d+, 3;\n"
                     r"\s+bar\.arrive \1, 256;", ptx), ptx
    assert ptx.index("bar.arrive 3, 256;") < ptx.index("bar.sync %r")
    log = ptxas_log(ptx)
    assert "warning" not in log.lower(), log


def test_in_a_cluster_a_local_arrive_releases_at_cta_scope_and_waits_acquire_at_cluster_scope():
    """Only this CTA waits on its barriers, so a local arrive publishes to the CTA (a cluster-scope
    release would wait for the thread's writes to reach the whole cluster); a wait may follow a
    peer's cluster-scope release, so it acquires at cluster scope."""
    @ad.kernel(grid=(2,), cluster=(2, 1, 1), block=256)
    def kernel(x):
        buf = ad.smem((64, 64), ad.float32)
        mine = ad.barrier(arrival_count=1)
        with ad.when(ad.warpgroup_idx() == 0):
            buf[...] = ad.load(x.at[ad.ds(0, 64), :])
            mine.arrive()
        with ad.when(ad.warpgroup_idx() == 1):
            mine.wait()
            ad.store(x.at[ad.ds(64, 64), :], buf[...])

    ptx = kernel.ptx(ad.ArraySpec((128, 64), ad.float32))
    assert "mbarrier.arrive.release.cta.shared::cta.b64" in ptx
    assert "mbarrier.arrive.release.cluster" not in ptx
    assert "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64" in ptx
    assemble(ptx)
