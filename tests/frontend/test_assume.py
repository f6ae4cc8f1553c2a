"""`check_all` (`asyncdsl.frontend.assume`): a kernel's statement about data it reads.  The
interpreter reports a false element as an AssumptionError naming the calling line and how many
were false; a kernel compiled with ASYNCDSL_DEBUG=1 carries the check (an error buffer, a
compare-and-swap) and assembles; without it the check costs no instruction; a tile that is not
a bool one is refused while tracing."""

from __future__ import annotations

import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl.frontend.assume import check_all
from asyncdsl.kernel_binary import ErrorBufferParam


@ad.kernel(grid=(1,), block=128)
def doubled_indices(ids, out):
    """out = 2 · ids, stating that every id is below 100."""
    values = ad.load(ids)
    check_all(values < 100, "an id is 100 or more")
    ad.store(out, values * 2)


def test_the_interpreter_reports_a_false_element_at_the_callers_line():
    ids = np.arange(64, dtype=np.int32)
    out = np.zeros(64, np.int32)
    doubled_indices.interpret(ids, out)
    assert (out == 2 * ids).all()
    ids[[5, 9]] = 100
    with pytest.raises(ad.AssumptionError, match=r"an id is 100 or more \(2 of 64 elements false, the first "
                                                 r"at \(5,\)\)") as caught:
        doubled_indices.interpret(ids, out)
    assert caught.value.location.file == __file__


def test_debug_mode_compiles_the_check_and_release_mode_drops_it(monkeypatch, ptxas):
    spec = ad.ArraySpec((64,), ad.int32)
    released = doubled_indices.ptx(spec, spec)
    assert "atom.global.cas" not in released
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    debug = ad.kernel(grid=(1,), block=128)(doubled_indices.fn)
    compiled = debug.compile(spec, spec)
    param = compiled.binary.params[-1]
    assert isinstance(param, ErrorBufferParam)
    assert [check.message for check in param.checks] == ["an id is 100 or more"]
    assert "atom.global.cas" in compiled.ptx
    ptxas(compiled.ptx)


def test_a_tile_that_is_not_bool_is_refused():
    @ad.kernel(grid=(1,), block=128)
    def unchecked(ids):
        check_all(ad.load(ids), "ids")

    with pytest.raises(ad.TraceError, match="check_all takes a bool tile"):
        unchecked.ptx(ad.ArraySpec((64,), ad.int32))
