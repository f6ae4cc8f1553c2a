"""A kernel's compiled specialisations (`jit/specializations.py`), above all the disk cache
(`runtime/binary_cache.py`, keyed by `Specializations.disk_key` with `jit/code_digest.py`): a
fresh process takes a kernel compiled before from the disk without tracing it; a change of code,
argument layout, constexpr or option compiles again; a file that is not a kernel binary is a
miss; kernels of one factory whose closures differ, or whose globals changed, are other kernels."""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from support import DeviceTensor, HostTensor

import asyncdsl as ad
from asyncdsl.jit import code_digest as digest_module
from asyncdsl.jit.specializations import _specialization
from asyncdsl.kernel_binary import constexpr_key, constexpr_value
from asyncdsl.runtime.binary_cache import BinaryCache

X = ad.ArraySpec((256, 64), ad.float32)


@pytest.fixture
def kernel_cache(tmp_path, monkeypatch):
    """The kernel cache on, in a directory of this test's own."""
    monkeypatch.setenv("ASYNCDSL_KERNEL_CACHE", "1")
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "binary"


def copy_rows(x, y, rows: int, first) -> None:
    """The body of the kernels below: rows `first` .. `first + rows` of x to y through shared memory."""
    buf = ad.smem((rows, 64), x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[ad.ds(first, rows), :], buf, barrier=bar)
    bar.wait()
    ad.async_copy(buf, y.at[ad.ds(first, rows), :])
    ad.await_async_copy(0)


def copy_kernel():
    """A new Kernel object for the same function each call (what a new process makes)."""

    def tile_copy(x, y, BM: ad.constexpr):
        copy_rows(x, y, BM, ad.program_id(0) * BM)

    return ad.kernel(grid=(2,), block=128)(tile_copy)


def test_a_new_kernel_object_takes_the_binary_from_disk_without_tracing(kernel_cache, compilations):
    first = copy_kernel().binary((X, X), {"BM": 128})
    assert compilations[0] == 1 and len(list(kernel_cache.rglob("*.kernel"))) == 1
    again = copy_kernel()
    assert again.binary((X, X), {"BM": 128}) == first
    assert compilations[0] == 1 and not again.specializations.compiled  # nothing traced


@pytest.mark.parametrize("change", ["constexpr", "layout", "profile", "debug"])
def test_what_the_trace_depends_on_compiles_again(kernel_cache, compilations, monkeypatch, change):
    copy_kernel().binary((X, X), {"BM": 128})
    specs, constexprs, profile = (X, X), {"BM": 128}, False
    if change == "constexpr":
        constexprs = {"BM": 64}
    elif change == "layout":
        specs = (ad.ArraySpec((512, 64), ad.float32), X)
    elif change == "profile":
        profile = True
    else:
        monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    copy_kernel().binary(specs, constexprs, profile)
    assert compilations[0] == 2


def copy_kernel_of(bm: int):
    """A kernel made by a factory: the same code for every `bm`, which its closure holds."""

    def tile_copy(x, y):
        copy_rows(x, y, bm, ad.program_id(0) * bm)

    return ad.kernel(grid=(2,), block=128)(tile_copy)


def test_kernels_of_one_factory_with_other_closures_are_other_kernels(kernel_cache, compilations):
    small, large = copy_kernel_of(64).binary((X, X), {}), copy_kernel_of(128).binary((X, X), {})
    assert compilations[0] == 2 and small.ptx != large.ptx
    assert copy_kernel_of(128).binary((X, X), {}) == large and compilations[0] == 2  # from disk


ROWS = 64  # a global the kernel below reads, as a module may compute one at import


def rows_kernel():
    def tile_copy(x, y):
        copy_rows(x, y, ROWS, 0)

    return ad.kernel(grid=(1,), block=128)(tile_copy)


def test_a_global_of_another_value_is_another_kernel(kernel_cache, compilations, monkeypatch):
    first = rows_kernel().binary((X, X), {})
    monkeypatch.setitem(globals(), "ROWS", 128)
    second = rows_kernel().binary((X, X), {})
    assert compilations[0] == 2 and first.ptx != second.ptx


def test_an_attribute_of_the_users_module_of_another_value_is_another_kernel(
        kernel_cache, compilations, monkeypatch, tmp_path):
    """`settings.ROWS` read from a module of the user's: its file holds the code that set it, not
    the value a process may have put there since."""

    (tmp_path / "tile_settings.py").write_text("ROWS = 64\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = importlib.import_module("tile_settings")

    def settings_kernel():
        def tile_copy(x, y):
            copy_rows(x, y, settings.ROWS, 0)

        return ad.kernel(grid=(1,), block=128)(tile_copy)

    first = settings_kernel().binary((X, X), {})
    assert "settings.ROWS=int:64" in digest_module.bound_values(settings_kernel().fn)
    monkeypatch.setattr(settings, "ROWS", 128)
    second = settings_kernel().binary((X, X), {})
    assert compilations[0] == 2 and first.ptx != second.ptx
    assert settings_kernel().binary((X, X), {}) == second and compilations[0] == 2  # from disk
    monkeypatch.delitem(sys.modules, "tile_settings")


def test_a_module_the_trace_imports_leaves_the_kernel_unfiled_under_the_key_it_missed(
        kernel_cache, compilations, monkeypatch, tmp_path):
    """The key taken before the trace did not cover a module the trace imported: a process that
    has not imported it takes that key too, and must not find a kernel traced from other code."""
    (tmp_path / "lazy_rows.py").write_text("ROWS = 64\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def lazy_kernel():
        def tile_copy(x, y):
            import lazy_rows

            copy_rows(x, y, lazy_rows.ROWS, 0)

        return ad.kernel(grid=(1,), block=128)(tile_copy)

    monkeypatch.setattr(digest_module, "_seen", dict(digest_module._seen))
    first = lazy_kernel().binary((X, X), {})
    assert lazy_kernel().binary((X, X), {}) == first and compilations[0] == 2  # filed now: imported
    # A new process, after an edit of the module it has not imported yet.
    monkeypatch.delitem(sys.modules, "lazy_rows")
    monkeypatch.setattr(digest_module, "_seen", {})
    (tmp_path / "lazy_rows.py").write_text("ROWS = 128\n")
    importlib.invalidate_caches()
    second = lazy_kernel().binary((X, X), {})
    assert compilations[0] == 3 and second.ptx != first.ptx
    monkeypatch.delitem(sys.modules, "lazy_rows")


def test_a_kernel_given_an_array_the_host_cannot_read_has_no_disk_key(kernel_cache):
    """Its bytes cannot go into the key: it is traced in every process instead of taken from disk
    (where another process's tensor may have left a kernel traced from other values)."""
    on_gpu = DeviceTensor(np.arange(5000))
    assert copy_kernel().specializations.disk_key((X, X), {"BM": 64, "TABLE": on_gpu}, False, 1) is None
    keys = copy_kernel().specializations.disk_key
    readable = {keys((X, X), {"BM": 64, "TABLE": HostTensor(values)}, False, 1)
                for values in (np.arange(5000), np.arange(5000) * 2)}
    assert len(readable) == 2 and None not in readable


def test_equal_constexprs_of_other_types_are_other_kernels(kernel_cache):
    kernel = copy_kernel()
    keys = {kernel.specializations.disk_key((X, X), {"BM": value}, False, 1) for value in (1, 1.0, True)}
    assert len(keys) == 3


def test_a_float_constexpr_is_keyed_by_its_bits(kernel_cache):
    # 0.0 == -0.0, (1, 2) == (1.0, 2.0) and nan != nan, yet a kernel traced with one sign of zero
    # computes x * C differently, and one NaN must find the kernel another of its bits compiled.
    nan, other_nan = float("nan"), struct.unpack("<d", struct.pack("<d", float("nan")))[0]
    assert nan is not other_nan
    kernel = copy_kernel()
    values = (0.0, -0.0, (1, 2), (1.0, 2.0), nan, other_nan, -nan)
    memory = {_specialization((X, X), {"C": value}, False, 1) for value in values}
    disk = {kernel.specializations.disk_key((X, X), {"C": value}, False, 1) for value in values}
    assert len(memory) == len(disk) == 6  # the two NaNs of the same bits are one kernel
    for value in (0.0, -0.0, (1, (2.5, -0.0)), nan, -nan, "x", None, ad.bfloat16):
        again = constexpr_value(constexpr_key(value))
        assert type(again) is type(value) and constexpr_key(again) == constexpr_key(value)


def test_ir_prints_only_the_stage_it_returns_and_its_compile_serves_the_next(compilations, monkeypatch):
    from asyncdsl.passes import pipeline

    printed = []
    ir_text = pipeline.ir_text
    monkeypatch.setattr(pipeline, "ir_text", lambda module: printed.append(1) or ir_text(module))
    kernel = copy_kernel()
    resolved = kernel.ir(X, X, BM=128, after="resolve-transforms")
    assert "asyncdsl.kernel" in resolved and len(printed) == 1
    assert set(kernel.stages(X, X, BM=128)) == set(pipeline.STAGE_NAMES)
    assert kernel.stages(X, X, BM=128)["resolve-transforms"] == resolved
    compiled = compilations[0]
    kernel.ptx(X, X, BM=128)
    assert compilations[0] == compiled  # the specialisation the stages compiled
    with pytest.raises(ad.ArgumentError, match="unknown pass 'fuse'; passes: trace, infer-layouts"):
        kernel.ir(X, X, BM=128, after="fuse")


def test_a_kernel_without_a_source_file_or_with_an_address_in_a_constexpr_or_closure_is_not_filed(
        kernel_cache, compilations):
    assert digest_module.code_digest("<stdin>") is None

    class Opaque:  # repr names the object's address: different in every process
        def __hash__(self):
            return 1

    @ad.kernel(grid=(1,), block=128)
    def ignores(x, TAG: ad.constexpr):
        bar = ad.barrier()
        bar.arrive()
        bar.wait()

    ignores.binary((X,), {"TAG": Opaque()})
    tag = Opaque()

    @ad.kernel(grid=(1,), block=128)
    def closes_over_an_address(x):
        assert tag is not None
        bar = ad.barrier()
        bar.arrive()
        bar.wait()

    closes_over_an_address.binary((X,), {})
    assert not kernel_cache.exists() or not list(kernel_cache.rglob("*.kernel"))


def _exec_kernel(path):
    """The kernel `wait` of source file `path`, exec'd without `__name__` in its globals (as a
    tool that runs a user's source may): its function's `__module__` is None."""
    scope = {"ad": ad}
    exec(compile(path.read_text(), str(path), "exec"), scope)
    return scope["wait"]


def test_a_kernel_execd_without_a_module_name_is_filed_by_its_file(kernel_cache, compilations, tmp_path):
    source = textwrap.dedent("""
        @ad.kernel(grid=(1,), block=128)
        def wait(x):
            bar = ad.barrier()
            bar.arrive()
            bar.wait()
    """)
    first, second = tmp_path / "first_kernel.py", tmp_path / "second_kernel.py"
    first.write_text(source)
    second.write_text(source)
    kernel = _exec_kernel(first)
    assert kernel.fn.__module__ is None
    binary = kernel.binary((X,), {})
    assert compilations[0] == 1 and len(list(kernel_cache.rglob("*.kernel"))) == 1
    assert _exec_kernel(first).binary((X,), {}) == binary and compilations[0] == 1  # from disk
    _exec_kernel(second).binary((X,), {})  # the same code in another file: another kernel
    assert compilations[0] == 2 and len(list(kernel_cache.rglob("*.kernel"))) == 2


def test_a_file_that_is_not_a_kernel_binary_is_a_miss(tmp_path):
    cache = BinaryCache(tmp_path)
    binary = copy_kernel().binary((X, X), {"BM": 128})
    cache.store("aa" * 32, binary)
    assert cache.load("aa" * 32) == binary
    path = cache._files.path("aa" * 32)
    path.write_bytes(path.read_bytes()[:-1])  # truncated: fails its checksum
    assert cache.load("aa" * 32) is None
    # A well-formed file whose pickle would call something: refused by the unpickler.
    cache._files.store("bb" * 32, pickle.dumps(print))
    assert cache.load("bb" * 32) is None
    cache._files.store("cc" * 32, pickle.dumps(("not", "a", "binary")))
    assert cache.load("cc" * 32) is None


def test_a_second_process_does_not_trace_or_load_the_compiler(tmp_path):
    script = tmp_path / "second_process.py"
    script.write_text(textwrap.dedent("""
        import sys
        import asyncdsl as ad
        from asyncdsl.kernels.gemm_cooperative import matmul
        specs = (ad.ArraySpec((256, 320), ad.bfloat16), ad.ArraySpec((320, 512), ad.bfloat16),
                 ad.ArraySpec((256, 512), ad.bfloat16))
        binary = matmul.binary(specs, {"CTAS": 3})
        compiler = "compiler loaded" if "xdsl" in sys.modules else "no compiler"
        print("traced" if matmul.specializations.compiled else "from disk", compiler, len(binary.ptx))
    """))
    env = {**os.environ, "ASYNCDSL_KERNEL_CACHE": "1", "ASYNCDSL_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                           check=True).stdout
            for _ in range(2)]
    assert runs[0].startswith("traced compiler loaded") and runs[1].startswith("from disk no compiler"), runs
    assert runs[0].split()[-1] == runs[1].split()[-1]  # the same PTX


def test_import_asyncdsl_leaves_the_compiler_for_the_first_trace():
    """`import asyncdsl` (and decorating a kernel) loads neither xDSL nor the dialects or passes;
    every public name still resolves."""
    code = ("import sys, asyncdsl as ad\n"
            "@ad.kernel(grid=(1,), block=128)\n"
            "def k(x, B: ad.constexpr): pass\n"
            "assert not [m for m in sys.modules if m.startswith(('xdsl', 'asyncdsl.dialects', "
            "'asyncdsl.passes'))]\n"
            "missing = [name for name in ad.__all__ if getattr(ad, name, None) is None]\n"
            "assert not missing, missing\n"
            "assert 'xdsl' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_garbage_collector_waits_while_a_kernel_compiles():
    """A compile holds Python's cyclic collector off (its collections, in a process holding many
    objects, cost more than the compile) and gives it back after, also when the trace fails; a
    collector the caller turned off stays off."""
    import gc

    seen = []

    @ad.kernel(grid=(1,))
    def probe(x, FAIL: ad.constexpr):
        seen.append(gc.isenabled())
        if FAIL:
            raise ad.TraceError("refused on purpose")

    x = ad.ArraySpec((64,), ad.float32)
    assert gc.isenabled()
    probe.compile(x, FAIL=False)
    with pytest.raises(ad.TraceError, match="on purpose"):
        probe.compile(x, FAIL=True)
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        probe.compile(x, FAIL=0)  # another specialisation (an int), compiled
        assert seen[-1] is False and not gc.isenabled()
    finally:
        gc.enable()


def test_kernels_compiled_in_two_threads_at_once_are_each_their_own():
    """Tracing keeps the kernel being traced in one stack for the process: a trace let in while
    another one is running (here: the first waits for the second to begin before it emits its
    ops, the second for the first's ops) would put its ops in the other kernel."""
    first_inside, second_inside, first_emitted = threading.Event(), threading.Event(), threading.Event()

    def first(x, y):
        first_inside.set()
        second_inside.wait(timeout=0.5)  # the second trace has begun, if it may begin now
        copy_rows(x, y, 64, 0)
        first_emitted.set()

    def second(x, y):
        second_inside.set()
        first_emitted.wait(timeout=0.5)
        copy_rows(x, y, 128, 0)

    def kernel(body):
        return ad.kernel(grid=(1,), block=128)(body)

    for event in (first_inside, second_inside, first_emitted):
        event.set()
    alone = [kernel(body).compile(X, X).binary.ptx for body in (first, second)]
    for event in (first_inside, second_inside, first_emitted):
        event.clear()
    results: list = [None, None]

    def compile_in_thread(which: int) -> None:
        try:
            results[which] = kernel((first, second)[which]).compile(X, X).binary.ptx
        except Exception as error:  # noqa: BLE001 - compared below
            results[which] = error

    threads = [threading.Thread(target=compile_in_thread, args=(which,)) for which in (0, 1)]
    threads[0].start()
    first_inside.wait(timeout=30)
    threads[1].start()
    for thread in threads:
        thread.join()
    assert results == alone
