"""Distributed shared memory: register tiles written to and read from another CTA's copy of a
buffer (`buf.peer(rank)`), in the interpreter against numpy, in PTX through ptxas, and the
errors for ranks and uses that cannot be."""

from __future__ import annotations

import inspect
import sys

import numpy as np
import peer_smem_kernels
import pytest
from peer_smem_kernels import CASES, expected_rotation, rotation_input, rotation_kernel, rotation_output_shape
from support import same_bytes

import asyncdsl as ad
from asyncdsl.errors import OutOfBoundsError


def _arrays(size, columns, rounds, dtype, seed=0):
    x = rotation_input(size, columns, dtype, seed)
    return x, np.zeros(rotation_output_shape(size, columns, rounds), x.dtype)


@pytest.mark.parametrize("size, columns, layout, pull, rounds, dtype", CASES)
def test_tiles_move_between_the_ctas_of_a_cluster(size, columns, layout, pull, rounds, dtype):
    x, y = _arrays(size, columns, rounds, dtype)
    rotation_kernel(size, columns, layout, pull, rounds).interpret(x, y)
    assert same_bytes(y, expected_rotation(x, size, rounds))


@pytest.mark.parametrize("size, columns, layout, pull, rounds, dtype", CASES)
def test_peer_accesses_are_mapped_cluster_loads_and_stores_that_assemble(
        size, columns, layout, pull, rounds, dtype, ptxas):
    x, y = _arrays(size, columns, rounds, dtype)
    ptx = rotation_kernel(size, columns, layout, pull, rounds).ptx(x, y)
    remote = "ld.shared::cluster" if pull else "st.shared::cluster"
    assert remote in ptx and "mapa.shared::cluster.u32" in ptx
    # ldmatrix/stmatrix reach this CTA only: the peer side never uses them.
    peer_side = [line for line in ptx.splitlines() if "shared::cluster" in line and "matrix" in line]
    assert not peer_side
    ptxas(ptx)


def test_reading_the_mailbox_before_the_senders_arrival_is_a_race():
    x, y = _arrays(2, 128, 1, ad.float32)
    with pytest.raises(ad.RaceError, match="register-tile store") as caught:
        rotation_kernel(2, 128, skip="landed").interpret(x, y)
    assert f"peer_smem_kernels.py:{_line_of(peer_smem_kernels, 'got = mailbox')}" in str(caught.value)


def test_writing_the_peers_mailbox_again_before_it_was_read_is_a_race():
    x, y = _arrays(2, 128, 2, ad.float32)
    with pytest.raises(ad.RaceError, match="register-tile"):
        rotation_kernel(2, 128, rounds=2, skip="drained").interpret(x, y)


@ad.kernel(grid=(2,))
def peer_without_cluster(x, y):
    buf = ad.smem((64, 32), x.dtype)
    buf.peer(1)[...] = ad.load(x.at[ad.ds(0, 64), :])


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def peer_beyond_cluster(x, y):
    buf = ad.smem((64, 32), x.dtype)
    buf.peer(2)[...] = ad.load(x.at[ad.ds(0, 64), :])


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def peer_rank_traced_beyond_cluster(x, y):
    buf = ad.smem((64, 32), x.dtype)
    buf.peer(ad.cluster_cta_id(0) + 1)[...] = ad.load(x.at[ad.ds(0, 64), :])


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def peer_as_copy_destination(x, y):
    buf = ad.smem((64, 32), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, 64), :], buf.peer(1), barrier=bar)


def _line_of(module, text: str) -> int:
    """The number of the line of `module` that holds `text`."""
    lines = inspect.getsource(module).splitlines()
    return next(number for number, line in enumerate(lines, start=1) if text in line)


def _raise_line(kernel, error, pattern, line_text):
    x = np.zeros((64, 32), np.float32)
    with pytest.raises(error, match=pattern) as caught:
        kernel.interpret(x, x.copy())
    assert f"test_peer_smem.py:{_line_of(sys.modules[__name__], line_text)}:" in str(caught.value)


def test_a_peer_in_a_kernel_without_a_cluster_is_an_error_at_its_line():
    _raise_line(peer_without_cluster, ad.TraceError, r"cluster \(1, 1, 1\) holds one CTA", "buf.peer(1)")


def test_a_rank_past_the_cluster_is_an_error_at_its_line():
    _raise_line(peer_beyond_cluster, ad.TraceError, "0 to 1", "buf.peer(2)")


def test_a_traced_rank_past_the_cluster_is_caught_by_the_interpreter():
    _raise_line(peer_rank_traced_beyond_cluster, OutOfBoundsError, "CTA rank 2",
                "buf.peer(ad.cluster_cta_id(0) + 1)")


def test_a_peer_buffer_is_not_a_copy_destination():
    _raise_line(peer_as_copy_destination, ad.TraceError, "PeerSmem", "buf.peer(1), barrier=bar")


@ad.kernel(grid=(2,), cluster=(2, 1, 1))
def slots_of_a_peer(x, y):
    """Each CTA writes its rows into slot `me` of the other's two-slot mailbox, through a view of
    the peer (`peer(r).at[slot]`) and a peer of a view (`at[slot].peer(r)`) in turn, then stores
    both slots of its own."""
    me = ad.cluster_cta_id(0)
    other = 1 - me
    mailbox = ad.smem((2, 2, 64, 32), ad.float32)
    landed = ad.barrier(arrival_count=2)
    mine = ad.load(x.at[ad.ds(me * 64, 64), :])
    mailbox.peer(other).at[0, me][...] = mine
    mailbox.at[1, me].peer(other)[...] = mine * 2.0
    landed.arrive(collective="x")
    landed.wait()
    for copy in range(2):
        ad.store(y.at[ad.ds((me * 2 + copy) * 64, 64), :], mailbox.at[copy, other][...])


def test_views_of_a_peer_and_peers_of_a_view_reach_the_same_slot(ptxas):
    x = np.random.default_rng(3).integers(-64, 64, (128, 32)).astype(np.float32)
    y = np.zeros((256, 32), np.float32)
    slots_of_a_peer.interpret(x, y)
    # CTA c stores what CTA 1 - c sent it: its rows, then twice its rows.
    expected = np.concatenate([x[64:], 2 * x[64:], x[:64], 2 * x[:64]])
    assert same_bytes(y, expected)
    ptxas(slots_of_a_peer.ptx(x, y))
